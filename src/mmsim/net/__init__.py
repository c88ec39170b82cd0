"""Networking paths of the kernel model: sk_buffs and AF_UNIX stream sockets."""
