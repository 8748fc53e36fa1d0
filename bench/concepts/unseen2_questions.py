# ruff: noqa: E501
"""Questions for `unseen2_sessions.py`: (answer key, question, split). Each shares no term with its answer."""

QUESTIONS: list[tuple[str, str, str]] = [
    # storefront
    ("sf-pdp", "how did we speed up the item detail screens for shoppers?", "unseen2"),
    ("sf-pdp", "why is the product page quick now?", "unseen2"),
    ("sf-tax", "why were shoppers north of the border charged the wrong sales levy?", "unseen2"),
    ("sf-stacking", "what stops customers piling up multiple vouchers at checkout?", "unseen2"),
    ("sf-stacking", "how did we close the coupon loophole people shared on reddit?", "unseen2"),
    ("sf-images", "what did we change to shrink the bandwidth bill for product photos?", "unseen2"),
    ("sf-oversell", "how do we avoid selling sneakers we don't actually have when a launch gets busy?", "unseen2"),
    ("sf-guest", "do buyers need to sign up to purchase?", "unseen2"),
    ("sf-consent", "what did we settle on for tracking scripts and european privacy law?", "unseen2"),
    ("sf-failover", "what happens if our card processor goes down mid-purchase?", "unseen2"),
    ("sf-failover", "is there a backup payment provider?", "unseen2"),
    ("sf-rates", "where are delivery prices configured?", "unseen2"),
    # clinic-scheduler
    ("cs-noshow", "what did we do about patients skipping their appointments?", "unseen2"),
    ("cs-dst", "why did people turn up early after the spring clock change?", "unseen2"),
    ("cs-audit", "how can we prove who looked at a patient's medical history?", "unseen2"),
    ("cs-audit", "what do we have for HIPAA accountability?", "unseen2"),
    ("cs-overlap", "what prevents a doctor getting two patients in one time slot?", "unseen2"),
    ("cs-phi", "were we leaking personal health information to a third party?", "unseen2"),
    ("cs-window", "how far in advance can patients self-book?", "unseen2"),
    ("cs-waitlist", "what happens to an opening when somebody drops out?", "unseen2"),
    # sensor-fleet
    ("iot-ota", "what keeps a bad firmware release from killing devices in the field?", "unseen2"),
    ("iot-ota", "how do we recover if an over-the-air upgrade goes wrong?", "unseen2"),
    ("iot-battery", "why did the outdoor units run out of power so fast?", "unseen2"),
    ("iot-identity", "how do sensors authenticate when they connect?", "unseen2"),
    ("iot-ingest", "how does telemetry get from the message bus into the database?", "unseen2"),
    ("iot-clock", "how did we stop measurement times wandering on the devices?", "unseen2"),
    ("iot-eol", "what's the plan for the first-generation kit still deployed?", "unseen2"),
    ("iot-hil", "why do the physical test benches keep failing at random?", "unseen2"),
    # chat-relay
    ("chat-order", "how do we guarantee everybody sees messages in the same order?", "unseen2"),
    ("chat-e2e", "can we, the operators, read what people say to each other privately?", "unseen2"),
    ("chat-e2e", "are DMs end-to-end encrypted?", "unseen2"),
    ("chat-presence", "why did the service melt down when everyone came back online after the release?", "unseen2"),
    ("chat-push", "how do we avoid spamming phones when a group conversation is noisy?", "unseen2"),
    ("chat-retention", "how long do we hold on to uploaded files?", "unseen2"),
    ("chat-spam", "what did we do about scammers and bots?", "unseen2"),
    ("chat-idle", "why were quiet connections closing on their own?", "unseen2"),
    # quill-lang
    ("ql-gc", "how does the language free memory for objects that point at each other?", "unseen2"),
    ("ql-errors", "what made compile failures easier for users to understand?", "unseen2"),
    ("ql-perf", "why was the interpreter so sluggish?", "unseen2"),
    ("ql-slots", "what speedup did we get from the variable lookup change?", "unseen2"),
    ("ql-tco", "what did we decide about optimizing a function that invokes itself as its last step?", "unseen2"),
    ("ql-fuzz", "what crash did the random-input testing turn up?", "unseen2"),
    ("ql-unicode", "can programmers use non-English letters in variable names?", "unseen2"),
]
