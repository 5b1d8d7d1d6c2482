"""`python -m hip_backend ...`: the `hip-backend` command line."""

from hip_backend.cli import console

if __name__ == "__main__":
    console()
