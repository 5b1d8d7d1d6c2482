// HIP corpus: bitonic sort as the classic HIP sample does it: one launch per pass of each
// stage, each thread comparing one pair; `const uint` parameters and C++ linkage.
#include <hip/hip_runtime.h>

__global__ void bitonicSort(uint* theArray, const uint stage, const uint passOfStage,
                            const uint direction) {
    uint sortIncreasing = direction;
    uint threadId = blockIdx.x * blockDim.x + threadIdx.x;
    uint pairDistance = 1u << (stage - passOfStage);
    uint blockWidth = 2 * pairDistance;
    uint leftId = (threadId % pairDistance) + (threadId / pairDistance) * blockWidth;
    uint rightId = leftId + pairDistance;
    uint leftElement = theArray[leftId];
    uint rightElement = theArray[rightId];
    uint sameDirectionBlockWidth = 1u << stage;
    if ((threadId / sameDirectionBlockWidth) % 2 == 1) sortIncreasing = 1 - sortIncreasing;
    uint greater = leftElement > rightElement ? leftElement : rightElement;
    uint lesser = leftElement > rightElement ? rightElement : leftElement;
    theArray[leftId] = sortIncreasing ? lesser : greater;
    theArray[rightId] = sortIncreasing ? greater : lesser;
}
