"""CUDA: the toolkit (found, checked against torch and the host compiler), arch lists (their syntax, and the -gencode flags they become) and a build's CUDA set-up."""
