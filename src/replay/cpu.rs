//! The CPU backend: always there, multithreaded, streaming over the tensor in chunks.
