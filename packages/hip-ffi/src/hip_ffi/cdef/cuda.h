/* CUDA entry points: filled in for the nvidia platform. */
