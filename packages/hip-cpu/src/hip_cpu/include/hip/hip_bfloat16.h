/* hip_ffi cpu platform: <hip/hip_bfloat16.h> is the prelude, which the compiler already force-includes
 * (this shim lets portable sources include it). */
#pragma once
#include "../hip_cpu_prelude.h"
