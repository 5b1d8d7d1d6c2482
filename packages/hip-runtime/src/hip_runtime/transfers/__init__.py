"""Host↔device transfers below the tensor: `staging` (pinned staging for host→device copies, to
one device or several from the same chunk). Importing this folder imports nothing else.
"""
