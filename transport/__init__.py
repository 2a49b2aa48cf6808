"""What travels between pathgrade's boxes and who may send it: the consumer-group member
every plane's Kafka loop is (`consumer`: subscribe, rebalance callbacks, decode-and-skip,
commit after work), the settings every Kafka client shares (`kafka_settings`), reading a
topic until it is drained (`drain`), the signing of messages between boxes (`signing`), and
the bearer tokens that name a sender's tenant (`bearer_tokens`: the collector's receivers
and the UI's viewers both check them).

May import `schemas`, `content` and kafka-python; the collector, the planes and `pathgrade` may
import it, `schemas`, `content` and `detectors` never.
"""
