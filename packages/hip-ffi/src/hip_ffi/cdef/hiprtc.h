/* hiprtc: run-time compilation of HIP C++ (hiprtc.h). Inside libamdhip64 up to ROCm 6, in
 * libhiprtc.so.7 from ROCm 7; nvrtc under these names on the nvidia platform. */

typedef int hiprtcResult;
typedef struct _hiprtcProgram* hiprtcProgram;

hiprtcResult hiprtcVersion(int* major, int* minor);
const char* hiprtcGetErrorString(hiprtcResult result);
hiprtcResult hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int numHeaders, const char** headers, const char** includeNames);
hiprtcResult hiprtcDestroyProgram(hiprtcProgram* prog);
hiprtcResult hiprtcCompileProgram(hiprtcProgram prog, int numOptions, const char** options);
hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram prog, size_t* logSizeRet);
hiprtcResult hiprtcGetProgramLog(hiprtcProgram prog, char* log);
hiprtcResult hiprtcGetCodeSize(hiprtcProgram prog, size_t* codeSizeRet);
hiprtcResult hiprtcGetCode(hiprtcProgram prog, char* code);
/* Name expressions (`k<64>`, `ns::k`): registered before the compile, each one's lowered
 * (mangled) name read after it; the string belongs to the program. */
hiprtcResult hiprtcAddNameExpression(hiprtcProgram prog, const char* name_expression);
hiprtcResult hiprtcGetLoweredName(hiprtcProgram prog, const char* name_expression, const char** lowered_name);
