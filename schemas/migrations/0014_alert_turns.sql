-- Alerts name the agent turn they were found on (schemas/agent_turns.py): the trace and the
-- turn's top span. TraceStartNs / TraceEndNs of the rows written from now on are the turn's
-- top span's start and end. Rows written before have no turn ('').
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS TurnSpanId String DEFAULT '';
