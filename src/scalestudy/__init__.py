"""Paper artifact of a study of distributed training throughput (Horovod; VGG, Inception, ResNet)."""
