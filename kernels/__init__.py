"""Triton attention kernels for the two paths of a serving engine, their torch
reference, backends behind one interface, and a timing harness.

Modules (each imports torch and triton; nothing here is imported by the web
app): ``prefill_attention``, ``decode_attention``, ``store_kvcache``,
``reference``, ``backends``, ``timing``. ``attention_core`` holds the inner
loop the two attention kernels share. Design notes and sources:
``shared/reference/kernels.md``.
"""
