"""Members are matched as IAM matches them: a service account's email in any letter case names the same account,
so a grant spelt in capitals to a dedup identity is judged like any other."""

from __future__ import annotations

import pytest

from .conftest import run
from .test_rules_iam import POWERS, RUNTIME, SCHED, _dedup_stack, _project_member


@pytest.mark.parametrize(("member", "what"), [(f"serviceAccount:{RUNTIME.upper()}", "runtime"),
                                              (f"serviceAccount:{SCHED.title()}", "Scheduler")])
def test_a_dangerous_grant_to_a_dedup_identity_spelt_in_capitals_is_judged_as_that_identity(member: str,
                                                                                          what: str) -> None:
    findings = run(POWERS, [*_dedup_stack(), _project_member("roles/iam.serviceAccountUser", member)])
    assert any(f.message.startswith(f"{member}, the dedup job's {what} account") and f.level == "mandatory"
               for f in findings), [f.message for f in findings]
