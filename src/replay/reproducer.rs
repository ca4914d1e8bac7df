//! A short PyTorch script that loads the snapshot and makes the failing call.
