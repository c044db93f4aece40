"""Lowering: schedule -> loop IR -> TVM's VTA passes -> codegen -> memory image."""
