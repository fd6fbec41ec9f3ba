"""Development tooling beside the tests: never shipped in the wheel, never imported by src/."""
