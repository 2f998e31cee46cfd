"""Adapters that expose an hdppo hierarchy to other RL libraries (optional dependencies).

`hdppo.integrations.rllib`: a scenario's whole hierarchy as one RLlib `MultiAgentEnv`, plus a
`PPOConfig` with one RLModule per layer (needs `ray[rllib]`, the `ray` extra).
"""
