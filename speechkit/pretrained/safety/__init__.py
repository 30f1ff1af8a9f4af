"""What a YAML from a non-local source may build, vetted before anything is imported (docs/pretrained.md).

- :mod:`~speechkit.pretrained.safety.guard`: ``check_yaml_is_safe`` and the ``UntrustedYamlGuard`` that
  loading a YAML consults for every tag;
- :mod:`~speechkit.pretrained.safety.allowlist`: the exact names such a YAML may use (deny by default);
- :mod:`~speechkit.pretrained.safety.reference_bounds`: bounds on the YAML's aliases and references.
"""
