//! The GPU backend (feature `cuda`): cudarc with the driver and NVRTC loaded at run time.
