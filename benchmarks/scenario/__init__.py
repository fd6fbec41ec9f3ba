"""Issue 15's real-engine scenario: the same multi-turn sessions through Pharos and through
the simplest routers, on real llama-servers, reported from the engines' own timings.

One module, one job:
- conversations: the sessions (the simulator's synthetic chats, or ShareGPT when present),
- fleets: which llama-servers a run starts (equal, bypass, speed, models),
- client: one streamed chat and one user's replay, timed at the client,
- policies: where a turn goes (Pharos in-process, round-robin, sticky by user),
- report: the table (TTFT p50/p95, prompt-cache hit, turns, follow-ups that moved),
- __main__: the command line (`make scenario`).
Reports, never asserts.
"""
