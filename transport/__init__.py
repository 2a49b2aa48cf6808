"""Kafka transport the planes share: the consumer-group member every plane's Kafka loop is
(`consumer`: subscribe, rebalance callbacks, decode-and-skip, commit after work).

May import `schemas` and kafka-python; the collector, the planes and `pathgrade` may
import it, `schemas` and `detectors` never.
"""
