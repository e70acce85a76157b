"""The service account a Scheduler job's OIDC token is minted for must be in the job's project.

One implementation for the component (``scheduler_service_account_email``, at preview) and the policy pack
(``httpTarget.oidcToken.serviceAccountEmail``). Source: Cloud Scheduler REST reference, ``OidcToken``
(https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OidcToken):
``serviceAccountEmail`` is the "Service account email to be used for generating OIDC token. The service account
must be within the same project as the job."

This module imports neither pulumi nor pulumi_policy.
"""

from __future__ import annotations

OIDC_TOKEN_REFERENCE = "https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OidcToken"
_IAM_DOMAIN = ".iam.gserviceaccount.com"


def service_account_project(email: str) -> str | None:
    """The project id a service account email names, or None when the email does not say it.

    ``NAME@PROJECT.iam.gserviceaccount.com`` -> ``PROJECT`` (``NAME@P.DOMAIN.iam.gserviceaccount.com`` ->
    ``DOMAIN:P``, a domain-scoped project); ``PROJECT@appspot.gserviceaccount.com`` (App Engine's default account)
    -> ``PROJECT``. None for ``NUMBER-compute@developer.gserviceaccount.com`` (a project number, not an id),
    Google-managed service agents (``...@gcp-sa-*.iam.gserviceaccount.com``) and anything else.
    """
    local, _, domain = email.strip().lower().partition("@")
    if domain.endswith(_IAM_DOMAIN):
        core = domain[: -len(_IAM_DOMAIN)]
        if not core or core.startswith("gcp-sa-"):
            return None
        project, _, scope = core.partition(".")
        return f"{scope}:{project}" if scope else project
    if domain == "appspot.gserviceaccount.com":
        return local or None
    return None


def oidc_account_problem(email: str, project: str) -> str | None:
    """Why Scheduler would refuse ``email`` as the OIDC token's account of a job in ``project``, with the fix;
    None when it is in the project or the email does not name its project."""
    account_project = service_account_project(email)
    if account_project is None or account_project == project.strip().lower():
        return None
    return (f"{email!r} is a service account of project {account_project!r}, but the job is in {project!r}: Cloud "
            "Scheduler mints the OIDC token only for \"a service account within the same project as the job\" "
            f"(OidcToken, {OIDC_TOKEN_REFERENCE}), so creating the job would fail. Use an account of {project!r}, "
            "or deploy the job in the account's project")
