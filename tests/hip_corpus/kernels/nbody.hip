// HIP corpus: all-pairs n-body step on float4 bodies (xyz position, w mass), tiled through
// shared memory, plus a shift of every body by a float3 passed by value.
#include <hip/hip_runtime.h>

__device__ float3 body_body(float4 bi, float4 bj, float3 ai, float softening2) {
    float3 r = make_float3(bj.x - bi.x, bj.y - bi.y, bj.z - bi.z);
    float dist2 = r.x * r.x + r.y * r.y + r.z * r.z + softening2;
    float inv = 1.0f / sqrtf(dist2);
    float s = bj.w * inv * inv * inv;
    ai.x += r.x * s;
    ai.y += r.y * s;
    ai.z += r.z * s;
    return ai;
}

__global__ void nbody_step(const float4* pos, float4* vel, float4* new_pos, int n, float dt,
                           float softening2) {
    extern __shared__ float4 tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 me = i < n ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float3 acc = make_float3(0.0f, 0.0f, 0.0f);
    for (int base = 0; base < n; base += blockDim.x) {
        int j = base + threadIdx.x;
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
        for (int k = 0; k < (int)blockDim.x && base + k < n; ++k) {
            acc = body_body(me, tile[k], acc, softening2);
        }
        __syncthreads();
    }
    if (i < n) {
        float4 v = vel[i];
        v.x += acc.x * dt;
        v.y += acc.y * dt;
        v.z += acc.z * dt;
        vel[i] = v;
        new_pos[i] = make_float4(me.x + v.x * dt, me.y + v.y * dt, me.z + v.z * dt, me.w);
    }
}

__global__ void shift_bodies(float4* pos, float3 offset, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        pos[i].x += offset.x;
        pos[i].y += offset.y;
        pos[i].z += offset.z;
    }
}
