"""A small repository shaped like the one in issue 22: generated Terraform module READMEs
(input tables) and ADRs, where nothing covers etcd key rotation."""

from __future__ import annotations

from pathlib import Path

ETCD = "How do I rotate the etcd encryption key in the Kubernetes cluster?"

README_TEMPLATE = """# {name}

<!-- BEGIN_TF_DOCS -->
## Requirements

| Name | Version |
|------|---------|
| terraform | >= 1.5 |
| google | ~> 5.0 |

## Inputs

| Name | Description | Type | Default |
|------|-------------|------|---------|
| cluster_name | Name of the Kubernetes cluster | `string` | n/a |
| {key} | {description} | `{kind}` | `{default}` |
| labels | Labels applied to every resource | `map(string)` | `{{}}` |

## Outputs

| Name | Description |
|------|-------------|
| id | The resource id |
<!-- END_TF_DOCS -->
"""

MODULES = {
    "modules/gke-cluster/README.md": ("gke-cluster", "node_pool_size", "Number of nodes in the default pool", "number", "3"),
    "modules/kms-key/README.md": ("kms-key", "key_ring", "Name of the KMS key ring holding the key", "string", "main"),
    "modules/network/README.md": ("network", "subnet_cidr", "CIDR range of the cluster subnet", "string", "10.0.0.0/16"),
    "modules/bucket/README.md": ("bucket", "retention_days", "Days objects are kept before deletion", "number", "30"),
    "modules/dns/README.md": ("dns", "zone_name", "Managed DNS zone for the public records", "string", "example"),
    "modules/registry/README.md": ("registry", "repository_id", "Artifact registry repository for images", "string", "apps"),
}

ADRS = {
    "docs/adr/0001-terraform-modules.md": """# 1. Use Terraform modules for the network and clusters

## Status

Accepted

## Context

The approaches taken for provisioning infrastructure before this decision are:

- Hand-written gcloud scripts run from laptops.
- A shared console project edited by hand.

## Decision

We describe every environment with Terraform modules kept in this repository. A module
owns one concern (the network, a cluster, a bucket) and is reviewed like application code.

## Consequences

Changes are planned and applied from CI, so nobody needs owner rights on the project.
""",
    "docs/adr/0002-database-backups.md": """# 2. Database backups

## Decision

The Cloud SQL instance takes an automated backup every night at 02:00 UTC. Backups are
retained for 14 days and a point-in-time recovery log is kept for 7 days.

## Consequences

Restoring older data than 14 days is not possible; exports to the archive bucket cover
the yearly audit.
""",
}


def write_repo(root: Path) -> Path:
    """Write the repository under ``root`` and return it."""
    for path, (name, key, description, kind, default) in MODULES.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            README_TEMPLATE.format(name=name, key=key, description=description, kind=kind, default=default),
            encoding="utf-8",
        )
    for path, text in ADRS.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root
