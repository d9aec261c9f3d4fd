"""What is rendered from the resource model (`streamapp.api`): the CRDs, RBAC, install manifests, the Helm
chart's derived parts, admission policies, monitoring objects and the API reference.

`streamapp.api` holds only the types; this package reads them (and the rules the controller declares beside
the calls that need them, `controller.permissions`) and writes YAML. Nothing at run time imports it but the
`streamapp crd|manifests|chart|api-docs|monitoring` commands.
"""
