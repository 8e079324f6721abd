"""The training machinery: the loop, the four trainers, configs, checkpoints, run folders."""
