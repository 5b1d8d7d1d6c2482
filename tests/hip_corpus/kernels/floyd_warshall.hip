// HIP corpus: Floyd-Warshall all-pairs shortest paths, one launch per intermediate node over a
// 2-D grid, keeping the path matrix too (as the classic HIP sample does). Row and column
// `pass` do not change during pass `pass`, so the threads need no ordering.
#include <hip/hip_runtime.h>

__global__ void floydWarshallPass(uint* pathDistanceBuffer, uint* pathBuffer,
                                  const uint numNodes, const uint pass) {
    uint x = blockIdx.x * blockDim.x + threadIdx.x;
    uint y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= numNodes || y >= numNodes) return;
    uint oldWeight = pathDistanceBuffer[y * numNodes + x];
    uint tempWeight = pathDistanceBuffer[y * numNodes + pass] +
                      pathDistanceBuffer[pass * numNodes + x];
    if (tempWeight < oldWeight) {
        pathDistanceBuffer[y * numNodes + x] = tempWeight;
        pathBuffer[y * numNodes + x] = pass;
    }
}
