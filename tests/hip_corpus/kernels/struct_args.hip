// HIP corpus: user structs passed by value. Affine has padding (a double after a float), the
// namespaced Window none; hip-core learns their layouts once from a numpy dtype and a ctypes
// Structure.
#include <hip/hip_runtime.h>

struct Affine {
    float scale;
    double offset;
    int lo;
    int hi;
};

namespace img {
struct Window {
    int x0, y0, width, height;
};
}  // namespace img

__global__ void affine_clamp(const float* in, int* out, int n, Affine a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = (double)in[i] * a.scale + a.offset;
    int r = (int)floor(v);
    out[i] = r < a.lo ? a.lo : r > a.hi ? a.hi : r;
}

__global__ void crop(const float* image, float* out, int pitch, const img::Window w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w.width && y < w.height) out[y * w.width + x] = image[(w.y0 + y) * pitch + w.x0 + x];
}
