"""Tree algorithms, one module each: mmdt, concept, kernel_mmdt, imm, exkmc, cart, kdtree."""
