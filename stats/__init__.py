"""Statistics shared by the planes: the percentile bootstrap of the release gate (paired,
over dataset items) and of the monitors (unpaired, over live turns and samples).

Imports nothing of pathgrade's own, and of other libraries only numpy, so the realtime
plane and the batch plane can both import it.
"""
