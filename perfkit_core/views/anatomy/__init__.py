"""The anatomy of a step: how its time divides among layers, phases and the work each launched.

``structure`` (the layer tree of each step and its keys), ``attribution`` (each step's time by
phase, layer and op, device work included), ``windows`` (the step window a figure is taken
over), ``step_time`` (the stretched step and the kernels each step launched) and
``layer_accounting`` (a layer's own time and its children's). The summary views read them.
"""
