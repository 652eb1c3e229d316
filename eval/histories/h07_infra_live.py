from ._common import checks, commit, orient

LOGGING_MAIN = """resource "aws_s3_bucket" "logs" {
  bucket = "acme-${var.env}-access-logs"
}

resource "aws_s3_bucket_public_access_block" "logs" {
  bucket                  = aws_s3_bucket.logs.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}
"""

RDS_TF = """module "orders_db" {
  source  = "terraform-aws-modules/rds/aws"
  version = "6.5.2"

  identifier        = "orders-prod"
  engine            = "postgres"
  engine_version    = "16.3"
  instance_class    = "db.t3.medium"
  allocated_storage = 200

  multi_az                = true
  backup_retention_period = 14
  deletion_protection     = true
}
"""

VERSIONS_TF = """terraform {
  required_version = ">= 1.6"
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
  }
  backend "s3" {
    bucket         = "acme-terraform-state"
    key            = "prod/terraform.tfstate"
    region         = "eu-west-1"
    dynamodb_table = "terraform-locks"
  }
}
"""


def build(ds):
    h = ds.history("h07", "claude-code", "/home/dev/src/infra-live",
                   "Terraform for production AWS: a stuck state lock, S3 log lifecycle rules, resizing the orders RDS "
                   "instance twice, and pinning the AWS provider after a breaking upgrade.",
                   start="2026-03-10T08:00:00Z", model="claude-opus-4-7")
    h.commits = [("c2e4a90", "prod: WAF rules for the API ALB"), ("18f0b3d", "modules/logging: access log bucket"),
                 ("a77c5e1", "prod: orders RDS multi-AZ")]

    # ---- s1: state lock
    s = h.session("2026-03-10T09:22:41Z", mode="default", title="prod-state-lock")
    s.prompt("terraform plan in prod/ hangs then errors about the state lock. Nobody else should be running anything. "
             "Can you check before we force anything?")
    orient(s)
    e_lock = s.bash("cd prod && terraform plan -lock-timeout=60s -out=tfplan", "", code=1, stderr=(
        "\u2577\n\u2502 Error: Error acquiring the state lock\n\u2502 \n\u2502 Error message: operation error DynamoDB: PutItem, https response error "
        "StatusCode: 400, RequestID: 0b7d5e3c-91a4-4f2e-8c6d-2a1f9e7b4c30, ConditionalCheckFailedException: The conditional request failed\n"
        "\u2502 Lock Info:\n\u2502   ID:        6f1c2a9e-3b7d-4c58-a1e0-9d2b4f7e8c31\n\u2502   Path:      acme-terraform-state/prod/terraform.tfstate\n"
        "\u2502   Operation: OperationTypeApply\n\u2502   Who:       ci@runner-7f9c\n\u2502   Version:   1.9.8\n\u2502   Created:   2026-03-09 17:41:03.118 +0000 UTC\n"
        "\u2502 \n\u2502 Terraform acquires a state lock to protect the state from being written\n\u2502 by multiple users at the same time.\n\u2575\n"),
        desc="Plan prod", secs=62.0)
    s.bash("gh run list --workflow terraform-apply.yml --limit 3", "STATUS  TITLE                         WORKFLOW            BRANCH  EVENT  ID           ELAPSED  AGE\n"
           "X       prod: WAF rules for the API   terraform-apply.yml main    push   13411820937  41m2s    about 16 hours ago\n"
           "\u2713       modules/logging: access log   terraform-apply.yml main    push   13398112045  3m11s    about 2 days ago\n",
           desc="Recent apply runs")
    s.bash("gh run view 13411820937 --log | tail -4", "apply\tRun terraform apply\taws_wafv2_web_acl.api: Still modifying... [40m0s elapsed]\n"
           "apply\tRun terraform apply\t##[error]The job running on runner runner-7f9c has exceeded the maximum execution time of 40 minutes.\n"
           "apply\tCleaning up orphan processes\n", desc="Log of the failed apply")
    s.bash("aws wafv2 get-web-acl --scope REGIONAL --name api-acl --id 4c1e... --query 'WebACL.Rules[].Name' --output text 2>/dev/null || "
           "aws wafv2 list-web-acls --scope REGIONAL --query 'WebACLs[].Name' --output text", "api-acl\n", desc="Check the WAF ACL exists")
    s.stop("The lock is held by CI (ci@runner-7f9c, OperationTypeApply) from yesterday's 'WAF rules' apply that hit "
           "the 40-minute job timeout and was killed, so it never released the lock. Nothing is running now. Safe "
           "next step: `terraform force-unlock 6f1c2a9e-3b7d-4c58-a1e0-9d2b4f7e8c31`, then plan to see what the "
           "half-finished WAF change left behind. I did not unlock anything.")
    s.end("prompt_input_exit")
    s.resume(gap_hours=24)
    e_p_unlock = s.prompt("back on this. CI is still blocked, ok go ahead and unlock, then plan")
    e_unlock = s.bash("cd prod && terraform force-unlock -force 6f1c2a9e-3b7d-4c58-a1e0-9d2b4f7e8c31", "Terraform state has been successfully unlocked!\n\n"
                      "The state has been unlocked, and Terraform commands should now be able to\nobtain a new lock on the remote state.\n",
                      desc="Release the stale lock")
    s.bash("cd prod && terraform plan -out=tfplan | tail -6", "  # aws_wafv2_web_acl.api will be updated in-place\n  ~ resource \"aws_wafv2_web_acl\" \"api\" {\n"
           "        id          = \"4c1e7d2a-9b3f-4a61-8e0c-5d2f1b7a3e94\"\n      ~ rule {...}\n    }\n\nPlan: 0 to add, 1 to change, 0 to destroy.\n",
           desc="Plan prod", secs=48.0)
    s.stop("Unlocked. The plan only shows the WAF rule update that the killed CI run didn't finish (0 add, 1 change, 0 "
           "destroy). I'd re-run the apply from CI with a longer job timeout rather than locally.")
    s.end()

    # ---- s2: S3 lifecycle
    s = h.session("2026-03-12T13:04:27Z", mode="acceptEdits")
    s.prompt("The access log buckets are 41 TB and growing. Add lifecycle rules in the logging module: Glacier "
             "Instant Retrieval after 90 days, delete after 400 days (audit needs 13 months). Also clean up "
             "incomplete multipart uploads.")
    orient(s)
    s.read("modules/logging/main.tf", LOGGING_MAIN)
    s.read("modules/logging/variables.tf", """variable "env" {
  type = string
}
""")
    e_lifecycle = s.edit("modules/logging/main.tf", """resource "aws_s3_bucket_public_access_block" "logs" {""", """resource "aws_s3_bucket_lifecycle_configuration" "logs" {
  bucket = aws_s3_bucket.logs.id

  rule {
    id     = "archive-then-expire"
    status = "Enabled"
    filter {}

    transition {
      days          = var.archive_after_days
      storage_class = "GLACIER_IR"
    }
    expiration {
      days = var.expire_after_days # audit keeps 13 months
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

resource "aws_s3_bucket_public_access_block" "logs" {""")
    e_vars = s.edit("modules/logging/variables.tf", """variable "env" {
  type = string
}
""", """variable "env" {
  type = string
}

variable "archive_after_days" {
  type    = number
  default = 90
}

variable "expire_after_days" {
  type    = number
  default = 400
}
""")
    s.bash("cd prod && terraform init -upgrade=false >/dev/null && terraform validate", "Success! The configuration is valid.\n", desc="Validate", secs=9.0)
    s.bash("cd prod && terraform plan -target=module.logging | tail -4", "  # module.logging.aws_s3_bucket_lifecycle_configuration.logs will be created\n"
           "  + resource \"aws_s3_bucket_lifecycle_configuration\" \"logs\" {...}\n\nPlan: 1 to add, 0 to change, 0 to destroy.\n",
           desc="Plan the logging module", secs=30.0)
    checks(s, "terraform")
    s.stop("Added aws_s3_bucket_lifecycle_configuration to modules/logging: GLACIER_IR after archive_after_days (90), "
           "expiration after expire_after_days (400, the 13-month audit window plus margin), and incomplete "
           "multipart uploads aborted after 7 days. Plan is 1 to add.")
    s.prompt("commit, CI will apply")
    commit(s, "logging: lifecycle rules (Glacier IR at 90d, expire at 400d)", ["modules/logging/main.tf", "modules/logging/variables.tf"],
           "4d90e1b", 30, 0)
    s.bash("git push origin main", "", stderr="To github.com:acme/infra-live.git\n   a77c5e1..4d90e1b  main -> main\n", desc="Push")
    s.stop("Pushed 4d90e1b; the terraform-apply workflow will pick it up.")
    s.end()

    # ---- s3: RDS resize
    s = h.session("2026-03-17T08:40:55Z", mode="acceptEdits")
    e_p_rds = s.prompt("orders-prod RDS is pinned at 95% CPU during the morning batch and credit balance is 0 (t3 burst). "
                       "Move it to db.r6g.large. Multi-AZ so the failover should be short, do it as a plan first.")
    orient(s)
    s.read("prod/rds.tf", RDS_TF)
    s.bash("aws cloudwatch get-metric-statistics --namespace AWS/RDS --metric-name CPUCreditBalance --dimensions Name=DBInstanceIdentifier,Value=orders-prod "
           "--start-time 2026-03-16T00:00:00Z --end-time 2026-03-17T00:00:00Z --period 21600 --statistics Minimum --query 'Datapoints[].Minimum' --output text",
           "0.0\t0.0\t0.02\t41.7\n", desc="CPU credit balance")
    e_r6g = s.edit("prod/rds.tf", 'instance_class    = "db.t3.medium"', 'instance_class    = "db.r6g.large"')
    s.bash("cd prod && terraform plan -target=module.orders_db -out=rds.tfplan | tail -5",
           "  ~ resource \"aws_db_instance\" \"this\" {\n      ~ instance_class = \"db.t3.medium\" -> \"db.r6g.large\"\n        # (47 unchanged attributes hidden)\n    }\n\n"
           "Plan: 0 to add, 1 to change, 0 to destroy.\n", desc="Plan the RDS change", secs=25.0)
    e_apply_r6g = s.bash("cd prod && terraform apply rds.tfplan | tail -3", "module.orders_db.module.db_instance.aws_db_instance.this[0]: Modifications complete after 14m22s [id=db-6Q2ZK3J7RWE5VYBF4N]\n\n"
                         "Apply complete! Resources: 0 added, 1 changed, 0 destroyed.\n", desc="Apply", secs=870.0)
    s.stop("orders-prod is now db.r6g.large (2 vCPU, 16 GB, no burst credits). Applied in place with multi-AZ; the "
           "modify took 14m22s with one failover. Graviton r6g was chosen over m6i for the memory: the working set no "
           "longer fits in 4 GB.")
    s.prompt("commit it")
    commit(s, "prod: orders RDS db.t3.medium -> db.r6g.large", ["prod/rds.tf"], "9b13f4c", 1, 1)
    s.stop("Committed as 9b13f4c.")
    s.end()

    # ---- s4: provider upgrade breakage, pin
    s = h.session("2026-03-24T11:15:38Z", mode="acceptEdits")
    s.prompt("CI plan broke this morning on every stack, nobody changed terraform. Look at it")
    orient(s)
    e_prov_err = s.bash("cd prod && terraform init -upgrade && terraform plan 2>&1 | tail -12", "", code=1, stderr=(
        "- Installing hashicorp/aws v6.0.0...\n- Installed hashicorp/aws v6.0.0 (signed by HashiCorp)\n\u2577\n"
        "\u2502 Error: Unsupported argument\n\u2502 \n\u2502   on .terraform/modules/orders_db/modules/db_instance/main.tf line 47, in resource \"aws_db_instance\" \"this\":\n"
        "\u2502   47:   name = var.db_name\n\u2502 \n\u2502 An argument named \"name\" is not expected here.\n\u2575\n\u2577\n"
        "\u2502 Error: Invalid resource type\n\u2502 \n\u2502   on ../modules/logging/main.tf line 1: The provider hashicorp/aws does not support resource type \"aws_s3_bucket_acl\" with \"acl\" argument.\n\u2575\n"),
        desc="Init with upgrade and plan", secs=40.0)
    s.read("prod/versions.tf", VERSIONS_TF)
    s.web_search("terraform aws provider 6.0 upgrade guide breaking changes", [
        ("Terraform AWS Provider Version 6 Upgrade Guide", "https://registry.terraform.io/providers/hashicorp/aws/latest/docs/guides/version-6-upgrade"),
        ("Release v6.0.0 \u00b7 hashicorp/terraform-provider-aws", "https://github.com/hashicorp/terraform-provider-aws/releases/tag/v6.0.0")],
        "AWS provider 6.0.0 removes deprecated arguments, including aws_db_instance.name (use db_name); modules pinned to 5.x "
        "should constrain the provider with ~> 5.0 until upgraded.")
    e_pin = s.edit("prod/versions.tf", """    aws = {
      source = "hashicorp/aws"
    }""", """    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80" # 6.0 removed args our RDS module still uses; upgrade deliberately
    }""")
    s.bash("for d in prod staging shared; do sed -n '/required_providers/,/}/p' $d/versions.tf | grep -c version; done", "1\n0\n0\n", desc="Which stacks pin the provider")
    s.bash("sed -i 's#source = \"hashicorp/aws\"#source  = \"hashicorp/aws\"\\n      version = \"~> 5.80\"#' staging/versions.tf shared/versions.tf && git diff --stat",
           " prod/versions.tf    | 3 ++-\n shared/versions.tf  | 3 ++-\n staging/versions.tf | 3 ++-\n 3 files changed, 6 insertions(+), 3 deletions(-)\n",
           desc="Pin staging and shared too")
    s.bash("for d in prod staging shared; do (cd $d && terraform init -upgrade >/dev/null && terraform plan -detailed-exitcode >/dev/null; echo \"$d: $?\"); done",
           "prod: 0\nstaging: 0\nshared: 0\n", desc="Plan all stacks", secs=95.0)
    e_dec_pin = s.stop("hashicorp/aws 6.0.0 was released and none of our stacks constrained the provider version, so "
                       "`init -upgrade` in CI pulled it and the pinned RDS module (still using `name`) broke. Pinned "
                       "aws to ~> 5.80 in prod, staging and shared versions.tf; all three plan with no changes. Moving "
                       "to 6.x should be its own change together with the rds module 7.x upgrade.")
    s.prompt("commit and open a ticket note in docs/upgrades.md for the v6 work")
    s.write("docs/upgrades.md", """# Pending upgrades

## AWS provider 6.x
- All stacks pinned to `~> 5.80` on 2026-03-24 after 6.0.0 broke CI plans.
- Needs terraform-aws-modules/rds 7.x (drops `name`), and a check of S3 ACL resources in modules/logging.
""")
    commit(s, "Pin AWS provider to ~> 5.80 in all stacks", ["prod/versions.tf", "staging/versions.tf", "shared/versions.tf", "docs/upgrades.md"],
           "e6a2d07", 11, 3)
    s.stop("Committed as e6a2d07 with the upgrade note in docs/upgrades.md.")
    s.end()

    # ---- s5: RDS upsize again
    s = h.session("2026-04-07T07:58:12Z", mode="acceptEdits")
    s.prompt("Black Friday load test: orders-prod hits 90% CPU again on r6g.large and the replica lag spikes. Go one "
             "size up to r6g.xlarge and raise max_allocated_storage so storage autoscaling can kick in.")
    orient(s)
    s.read("prod/rds.tf")
    e_xlarge = s.multiedit("prod/rds.tf", [
        ('instance_class    = "db.r6g.large"', 'instance_class    = "db.r6g.xlarge"'),
        ("allocated_storage = 200", "allocated_storage     = 200\n  max_allocated_storage = 1000"),
    ])
    s.bash("cd prod && terraform plan -target=module.orders_db -out=rds.tfplan | tail -6",
           "  ~ resource \"aws_db_instance\" \"this\" {\n      ~ instance_class        = \"db.r6g.large\" -> \"db.r6g.xlarge\"\n"
           "      ~ max_allocated_storage = 0 -> 1000\n        # (46 unchanged attributes hidden)\n    }\n\nPlan: 0 to add, 1 to change, 0 to destroy.\n",
           desc="Plan", secs=24.0)
    s.bash("cd prod && terraform apply rds.tfplan | tail -2", "module.orders_db.module.db_instance.aws_db_instance.this[0]: Modifications complete after 16m05s [id=db-6Q2ZK3J7RWE5VYBF4N]\n\n"
           "Apply complete! Resources: 0 added, 1 changed, 0 destroyed.\n", desc="Apply", secs=970.0)
    s.stop("orders-prod is db.r6g.xlarge now (4 vCPU, 32 GB) and storage can autoscale from 200 GB up to 1000 GB. "
           "Applied with one multi-AZ failover (16m05s).")
    s.prompt("commit")
    commit(s, "prod: orders RDS to db.r6g.xlarge, storage autoscaling to 1TB", ["prod/rds.tf"], "7c5f2ab", 2, 2)
    s.stop("Committed as 7c5f2ab.")
    s.end()

    h.q("failed_command", "What error did terraform plan give in prod when it hung on the state?", "terraform state lock",
        "Error acquiring the state lock (ConditionalCheckFailedException), held by ci@runner-7f9c from a killed apply.",
        ["Error acquiring the state lock"], [e_lock])
    h.q("decision", "Did we force-unlock the terraform state, and who approved it?", "force unlock state",
        "Yes, after checking the lock came from a CI apply killed by the 40-minute timeout; the user said go ahead.",
        ["force-unlock"], [e_p_unlock, e_unlock])
    h.q("fix_location", "Where did we add the log retention rules for the access log buckets?", "log bucket retention",
        "modules/logging/main.tf (aws_s3_bucket_lifecycle_configuration) with defaults in modules/logging/variables.tf.",
        ["modules/logging/main.tf"], [e_lifecycle])
    h.q("knowledge_update", "What instance class is the orders production database now?", "orders database instance",
        "db.r6g.xlarge (db.t3.medium -> db.r6g.large -> db.r6g.xlarge).", ["db.r6g.xlarge"], [e_xlarge])
    h.q("temporal", "What did we first resize the orders RDS instance to, and why?", "rds cpu credits",
        "db.r6g.large, because the t3.medium was out of CPU credits at 95% CPU during the morning batch.",
        ["db.r6g.large"], [e_p_rds])
    h.q("failed_command", "Why did CI terraform plans break on every stack in March?", "terraform plan error",
        "init -upgrade pulled hashicorp/aws v6.0.0: 'Unsupported argument' name in the RDS module.",
        ["Unsupported argument"], [e_prov_err])
    h.q("decision", "Why is the AWS provider pinned to 5.x?", "aws provider pin",
        "6.0.0 removed arguments the pinned RDS module uses; upgrade deliberately with the rds module 7.x.",
        ["~> 5.80"], [e_dec_pin])
    h.q("file_history", "Which files define the log lifecycle variables and rules?", "lifecycle variables",
        "modules/logging/main.tf and modules/logging/variables.tf (archive_after_days 90, expire_after_days 400).",
        ["modules/logging/variables.tf", "archive_after_days"], [e_lifecycle, e_vars])
    h.q("temporal", "How long did the first RDS resize apply take?", "rds apply duration",
        "14m22s (db.t3.medium -> db.r6g.large).", ["14m22s"], [e_apply_r6g])
