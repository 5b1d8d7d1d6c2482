// Multi-dimensional grids and blocks: every thread writes its own coordinates.

// out[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z for the 3-D global index (x, y, z),
// from a 3-D grid of 3-D blocks. Launch: grid (ceil(nx/bx), ceil(ny/by), ceil(nz/bz)).
extern "C" __global__ void coordinates_3d(int* out, int nx, int ny, int nz) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z;
}

// out[y * nx + x] = blockIdx.y * gridDim.x + blockIdx.x (the linear block id) for a 2-D grid,
// and shape[0..5] = gridDim and blockDim as seen from inside.
extern "C" __global__ void block_ids_2d(int* out, int* shape, int nx, int ny) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < nx && y < ny) out[y * nx + x] = blockIdx.y * gridDim.x + blockIdx.x;
    if (x == 0 && y == 0) {
        shape[0] = gridDim.x, shape[1] = gridDim.y, shape[2] = gridDim.z;
        shape[3] = blockDim.x, shape[4] = blockDim.y, shape[5] = blockDim.z;
    }
}
