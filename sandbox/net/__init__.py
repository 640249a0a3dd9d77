"""The network below full-access: the egress proxy (the only way out), its
strict HTTP/1 reader, and listening sockets made inside a sandbox's network
namespace for the proxy to accept on from the host's.
"""
