"""Multi-agent envs in cages: agents as one more sample-tree dimension, policy mapping, self-play."""
