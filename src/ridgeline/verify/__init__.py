"""Verification: the task's hidden tests run in a fresh sandbox on the agent's final files."""

from ridgeline.verify.verifier import VerifierResult, read_reward, run_verifier

__all__ = ["VerifierResult", "read_reward", "run_verifier"]
