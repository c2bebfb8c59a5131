"""The op cost model: what an op of a run computes and moves, from its name and shapes.

One module per concern: ``canonical`` (one name per op across frameworks, and its family),
``family_rules`` (the rules adapters build op families on), ``shapes`` (input shapes and
dtypes as recorded), ``callcodes`` (compact codes of an op call's shapes), ``opcost`` (FLOPs and
bytes per op category, asked of the adapters through ``perfkit_op_cost``) and ``peaks`` (each
device's peak FLOP rates and bandwidth). The ``costs``, ``roofline`` and ``mfu`` views read them.
"""
