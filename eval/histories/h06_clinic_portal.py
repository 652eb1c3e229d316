from ._common import checks, commit, orient, pytest_ok

VIEWS = """from rest_framework import generics
from rest_framework.pagination import PageNumberPagination

from .models import Appointment
from .serializers import AppointmentSerializer


class AppointmentPagination(PageNumberPagination):
    page_size = 50


class AppointmentList(generics.ListAPIView):
    serializer_class = AppointmentSerializer
    pagination_class = AppointmentPagination

    def get_queryset(self):
        return Appointment.objects.filter(clinic=self.request.user.clinic).order_by("-starts_at")
"""

SERIALIZERS = """from rest_framework import serializers

from .models import Appointment


class AppointmentSerializer(serializers.ModelSerializer):
    patient_name = serializers.CharField(source="patient.full_name")
    doctor_name = serializers.CharField(source="doctor.display_name")
    room = serializers.CharField(source="room.label", default=None)

    class Meta:
        model = Appointment
        fields = ["id", "starts_at", "patient_name", "doctor_name", "room", "status"]
"""

TASKS = """from celery import shared_task
from django.utils import timezone

from .models import Appointment
from .sms import send_sms, SmsGatewayError


@shared_task(bind=True)
def send_reminder(self, appointment_id):
    appt = Appointment.objects.select_related("patient").get(pk=appointment_id)
    if appt.reminder_sent_at:
        return
    send_sms(appt.patient.phone, f"Reminder: appointment on {appt.starts_at:%d %b at %H:%M}")
    appt.reminder_sent_at = timezone.now()
    appt.save(update_fields=["reminder_sent_at"])
"""


def build(ds):
    h = ds.history("h06", "claude-code", "/home/dev/src/clinic-portal",
                   "Django + DRF clinic scheduling portal: N+1 queries on the appointments API, a migration conflict, "
                   "Celery SMS reminder retries, timezone-aware reminder times, and cursor pagination.",
                   start="2026-02-23T08:00:00Z")
    h.commits = [("0c4d1e2", "appointments: room assignment"), ("9ab3f51", "Patients can cancel online"),
                 ("71e0c6d", "Bump Django to 5.1")]

    # ---- s1: N+1
    s = h.session("2026-02-23T11:08:19Z", mode="default")
    s.prompt("/api/appointments/ takes 3-4 seconds for the big clinics. debug toolbar shows ~200 queries. fix the N+1")
    orient(s)
    s.read("appointments/views.py", VIEWS)
    s.read("appointments/serializers.py", SERIALIZERS)
    e_nplus1_before = s.bash("python manage.py shell -c \"from django.db import connection, reset_queries; from django.test.utils import CaptureQueriesContext; "
                             "from appointments.tests.factories import big_clinic_request; "
                             "from appointments.views import AppointmentList; "
                             "c=CaptureQueriesContext(connection); c.__enter__(); AppointmentList.as_view()(big_clinic_request()).render(); c.__exit__(None,None,None); print(len(c))\"",
                             "203\n", desc="Count queries for one page")
    e_nplus1 = s.edit("appointments/views.py", """        return Appointment.objects.filter(clinic=self.request.user.clinic).order_by("-starts_at")""",
                      """        return (
            Appointment.objects.filter(clinic=self.request.user.clinic)
            # patient, doctor and room are all read by the serializer: one JOIN instead of 3 queries per row
            .select_related("patient", "doctor", "room")
            .order_by("-starts_at")
        )""")
    s.read("appointments/tests/test_api.py", """from django.urls import reverse


def test_list_appointments(api_client, clinic_with_appointments):
    res = api_client.get(reverse("appointment-list"))
    assert res.status_code == 200
    assert len(res.json()["results"]) == 50
""")
    s.edit("appointments/tests/test_api.py", """    assert len(res.json()["results"]) == 50
""", """    assert len(res.json()["results"]) == 50


def test_list_appointments_query_count(api_client, clinic_with_appointments, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):
        api_client.get(reverse("appointment-list"))
""")
    s.bash("pytest appointments -q", pytest_ok(23, "2.91"), desc="Appointment tests", secs=4.0)
    s.stop("The serializer reads patient.full_name, doctor.display_name and room.label, and the queryset had no "
           "select_related, so each of the 50 rows cost 3-4 extra queries (203 total). get_queryset now does "
           "select_related('patient', 'doctor', 'room'): 3 queries per page (count, page, session). Added a test "
           "capping it at 4 queries.")
    s.prompt("commit")
    checks(s, "python", [0, 1])
    commit(s, "appointments: select_related patient/doctor/room (N+1)", ["appointments/views.py", "appointments/tests/test_api.py"],
           "a2f9e07", 12, 1)
    s.stop("Committed as a2f9e07.")
    s.end()

    # ---- s2: migration conflict + reminder task
    s = h.session("2026-02-27T09:45:30Z", mode="acceptEdits")
    s.prompt("I merged Priya's room-booking branch and now migrate refuses to run. Sort it out, then make the reminder "
             "SMS task retry when the gateway errors instead of silently dying.")
    orient(s)
    e_migconf = s.bash("python manage.py migrate", "", code=1, stderr=(
        "CommandError: Conflicting migrations detected; multiple leaf nodes in the migration graph: "
        "(0014_reminder_sent_at, 0014_room_booking in appointments).\nTo fix them run 'python manage.py makemigrations --merge'\n"),
        desc="Migrate", secs=2.0)
    s.bash("python manage.py showmigrations appointments | tail -4", " [X] 0012_cancel_reason\n [X] 0013_room\n [X] 0014_reminder_sent_at\n [ ] 0014_room_booking\n",
           desc="Migration state")
    s.read("appointments/migrations/0014_room_booking.py", """from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("appointments", "0013_room")]

    operations = [
        migrations.AddField("room", "bookable_online", models.BooleanField(default=False)),
    ]
""")
    e_merge = s.bash("python manage.py makemigrations --merge --noinput", "Merging appointments\n  Branch 0014_reminder_sent_at\n"
                     "    - Add field reminder_sent_at to appointment\n  Branch 0014_room_booking\n    - Add field bookable_online to room\n\n"
                     "Created new merge migration /home/dev/src/clinic-portal/appointments/migrations/0015_merge_20260227_0951.py\n",
                     desc="Create a merge migration")
    s.bash("python manage.py migrate", "Operations to perform:\n  Apply all migrations: admin, appointments, auth, contenttypes, patients, sessions\n"
           "Running migrations:\n  Applying appointments.0014_room_booking... OK\n  Applying appointments.0015_merge_20260227_0951... OK\n",
           desc="Migrate", secs=3.0)
    s.read("appointments/tasks.py", TASKS)
    e_retry3 = s.edit("appointments/tasks.py", """@shared_task(bind=True)
def send_reminder(self, appointment_id):
    appt = Appointment.objects.select_related("patient").get(pk=appointment_id)
    if appt.reminder_sent_at:
        return
    send_sms(appt.patient.phone, f"Reminder: appointment on {appt.starts_at:%d %b at %H:%M}")""",
                      """@shared_task(bind=True, max_retries=3, default_retry_delay=60)
def send_reminder(self, appointment_id):
    appt = Appointment.objects.select_related("patient").get(pk=appointment_id)
    if appt.reminder_sent_at:
        return
    try:
        send_sms(appt.patient.phone, f"Reminder: appointment on {appt.starts_at:%d %b at %H:%M}")
    except SmsGatewayError as exc:
        raise self.retry(exc=exc)""")
    s.write("appointments/tests/test_tasks.py", """from unittest import mock

import pytest
from celery.exceptions import Retry

from appointments.sms import SmsGatewayError
from appointments.tasks import send_reminder


@pytest.mark.django_db
def test_gateway_error_is_retried(appointment):
    with mock.patch("appointments.tasks.send_sms", side_effect=SmsGatewayError("503")):
        with pytest.raises(Retry):
            send_reminder.apply(args=[appointment.pk], throw=True)
""")
    s.bash("pytest appointments/tests/test_tasks.py -q", pytest_ok(1, "0.88"), desc="Task test")
    s.stop("Two separate branches both added a 0014 migration; makemigrations --merge created "
           "0015_merge_20260227_0951 and migrate applies cleanly. send_reminder now retries SmsGatewayError up to 3 "
           "times, 60 s apart, and reminder_sent_at still prevents a double send once one attempt succeeds.")
    s.prompt("commit both")
    commit(s, "Merge 0014 migrations; retry reminder SMS on gateway errors", ["appointments/migrations/0015_merge_20260227_0951.py",
           "appointments/tasks.py", "appointments/tests/test_tasks.py"], "5e8b3c4", 31, 1)
    s.stop("Committed as 5e8b3c4.")
    s.end()

    # ---- s3: naive datetime warnings / reminder times wrong
    s = h.session("2026-03-04T15:20:05Z", mode="acceptEdits")
    s.prompt("Patients in the Lisbon clinic get reminders saying 08:00 for a 09:00 appointment since the clocks... "
             "actually it's all the time. And the logs are full of 'received a naive datetime' warnings.")
    orient(s)
    e_naive = s.bash("pytest appointments -q -W error::RuntimeWarning 2>&1 | tail -6", "FAILED appointments/tests/test_booking.py::test_book_slot - RuntimeWarning: "
                     "DateTimeField Appointment.starts_at received a naive datetime (2026-03-10 09:00:00) while time zone support is active.\n"
                     "1 failed, 24 passed in 3.12s\n", code=1, desc="Turn naive datetime warnings into errors", secs=4.0)
    s.grep("datetime.strptime\\|datetime.combine", "appointments/booking.py:27:    starts_at = datetime.combine(day, slot.start)\n"
           "appointments/management/commands/import_slots.py:44:            start = datetime.strptime(row[\"start\"], \"%Y-%m-%d %H:%M\")\n",
           path="appointments")
    s.read("appointments/booking.py", """from datetime import datetime

from .models import Appointment


def book_slot(clinic, patient, day, slot):
    starts_at = datetime.combine(day, slot.start)
    return Appointment.objects.create(clinic=clinic, patient=patient, doctor=slot.doctor, starts_at=starts_at)
""")
    e_tzfix = s.edit("appointments/booking.py", """def book_slot(clinic, patient, day, slot):
    starts_at = datetime.combine(day, slot.start)""", """def book_slot(clinic, patient, day, slot):
    # Slots are wall-clock times in the clinic's own timezone.
    starts_at = datetime.combine(day, slot.start, tzinfo=ZoneInfo(clinic.timezone))""")
    s.edit("appointments/booking.py", "from datetime import datetime\n", "from datetime import datetime\nfrom zoneinfo import ZoneInfo\n")
    e_smslocal = s.edit("appointments/tasks.py", """        send_sms(appt.patient.phone, f"Reminder: appointment on {appt.starts_at:%d %b at %H:%M}")""",
                        """        local = timezone.localtime(appt.starts_at, ZoneInfo(appt.clinic.timezone))
        send_sms(appt.patient.phone, f"Reminder: appointment on {local:%d %b at %H:%M}")""")
    s.edit("appointments/tasks.py", "from django.utils import timezone\n", "from zoneinfo import ZoneInfo\n\nfrom django.utils import timezone\n")
    s.edit("appointments/tasks.py", """    appt = Appointment.objects.select_related("patient").get(pk=appointment_id)""",
           """    appt = Appointment.objects.select_related("patient", "clinic").get(pk=appointment_id)""")
    s.bash("pytest appointments -q -W error::RuntimeWarning", pytest_ok(26, "3.30"), desc="Tests with warnings as errors", secs=4.0)
    s.stop("Two bugs: book_slot built naive datetimes (Django then assumed UTC, so Lisbon slots were stored an hour off "
           "in summer time and the warnings), and the SMS formatted starts_at in UTC. Slots now get the clinic's "
           "ZoneInfo, and the reminder converts to the clinic timezone with timezone.localtime. "
           "The import_slots command has the same naive strptime; I left it for now since it only runs at setup.")
    s.prompt("fix import_slots too, then commit")
    s.read("appointments/management/commands/import_slots.py", """class Command(BaseCommand):
    def handle(self, *args, path, clinic_id, **opts):
        clinic = Clinic.objects.get(pk=clinic_id)
        for row in csv.DictReader(open(path)):
            start = datetime.strptime(row["start"], "%Y-%m-%d %H:%M")
            Slot.objects.create(clinic=clinic, start=start, doctor_id=row["doctor"])
""")
    s.edit("appointments/management/commands/import_slots.py", """            start = datetime.strptime(row["start"], "%Y-%m-%d %H:%M")""",
           """            start = datetime.strptime(row["start"], "%Y-%m-%d %H:%M").replace(tzinfo=ZoneInfo(clinic.timezone))""")
    s.bash("pytest -q -W error::RuntimeWarning", pytest_ok(58, "6.71"), desc="All tests", secs=8.0)
    commit(s, "Clinic-local aware datetimes for bookings, imports and reminder SMS",
           ["appointments/booking.py", "appointments/tasks.py", "appointments/management/commands/import_slots.py"], "c37d90a", 9, 4)
    s.stop("import_slots attaches the clinic timezone too. Committed as c37d90a.")
    s.end()

    # ---- s4: cursor pagination
    s = h.session("2026-03-11T10:02:48Z", mode="acceptEdits")
    e_p_cursor = s.prompt("The front desk app scrolls the appointment list and sees duplicates when bookings come in "
                          "meanwhile, and page=400 is slow. Switch /api/appointments/ to DRF's CursorPagination ordered by "
                          "starts_at. The count field goes away, tell the mobile team.")
    orient(s)
    s.read("appointments/views.py")
    e_cursorpag = s.edit("appointments/views.py", """class AppointmentPagination(PageNumberPagination):
    page_size = 50""", """class AppointmentPagination(CursorPagination):
    # Stable under concurrent inserts and no OFFSET scan; no total count.
    page_size = 50
    ordering = ("-starts_at", "-id")""")
    s.edit("appointments/views.py", "from rest_framework.pagination import PageNumberPagination",
           "from rest_framework.pagination import CursorPagination")
    e_keyerr = s.bash("pytest appointments -q 2>&1 | tail -8", "    def test_list_appointments_paginates(api_client, clinic_with_appointments):\n"
                      "        res = api_client.get(reverse(\"appointment-list\"))\n>       assert res.json()[\"count\"] == 120\n"
                      "E       KeyError: 'count'\n\nappointments/tests/test_api.py:19: KeyError\n"
                      "FAILED appointments/tests/test_api.py::test_list_appointments_paginates - KeyError: 'count'\n1 failed, 26 passed in 3.41s\n",
                      code=1, desc="Appointment tests", secs=4.0)
    s.read("appointments/tests/test_api.py", """def test_list_appointments_paginates(api_client, clinic_with_appointments):
    res = api_client.get(reverse("appointment-list"))
    assert res.json()["count"] == 120
    assert res.json()["next"].endswith("page=2")
""")
    s.edit("appointments/tests/test_api.py", """    res = api_client.get(reverse("appointment-list"))
    assert res.json()["count"] == 120
    assert res.json()["next"].endswith("page=2")""", """    first = api_client.get(reverse("appointment-list")).json()
    second = api_client.get(first["next"]).json()
    ids = [a["id"] for a in first["results"] + second["results"]]
    assert len(ids) == len(set(ids)) == 100""")
    s.bash("pytest appointments -q", pytest_ok(27, "3.38"), desc="Appointment tests", secs=4.0)
    s.bash("python manage.py spectacular --file schema.yml && git diff --stat schema.yml", " schema.yml | 18 ++++++------------\n 1 file changed, 6 insertions(+), 12 deletions(-)\n",
           desc="Regenerate the OpenAPI schema", secs=5.0)
    s.stop("AppointmentPagination is a CursorPagination ordered by (-starts_at, -id): rows no longer shift between "
           "pages when bookings arrive and there's no OFFSET scan. The response has next/previous cursor URLs and no "
           "count; test updated to walk two pages without duplicates, schema.yml regenerated. Mobile needs to follow "
           "`next` instead of computing page numbers.")
    s.prompt("commit")
    commit(s, "appointments API: cursor pagination", ["appointments/views.py", "appointments/tests/test_api.py", "schema.yml"], "e8a1f63", 11, 17)
    s.stop("Committed as e8a1f63.")
    s.end()

    # ---- s5: reminder retries 5 with backoff
    s = h.session("2026-03-19T08:31:16Z", mode="acceptEdits")
    e_p_outage = s.prompt("The SMS gateway had a 10 minute outage last night and about 60 reminders were never sent: 3 retries 60s "
             "apart isn't enough. Make it 5 retries with exponential backoff (celery's retry_backoff), capped at 10 minutes.")
    orient(s)
    e_outage = s.bash("grep -c 'send_reminder.*Retry in 60s' /var/log/clinic/celery-worker.log; grep -c 'MaxRetriesExceededError' /var/log/clinic/celery-worker.log",
                      "183\n61\n", desc="Count retries and give-ups", secs=1.0)
    s.read("appointments/tasks.py")
    e_retry5 = s.edit("appointments/tasks.py", "@shared_task(bind=True, max_retries=3, default_retry_delay=60)",
                      "@shared_task(\n    bind=True,\n    autoretry_for=(SmsGatewayError,),\n    max_retries=5,\n    retry_backoff=30,\n"
                      "    retry_backoff_max=600,\n    retry_jitter=True,\n)")
    s.edit("appointments/tasks.py", """    try:
        local = timezone.localtime(appt.starts_at, ZoneInfo(appt.clinic.timezone))
        send_sms(appt.patient.phone, f"Reminder: appointment on {local:%d %b at %H:%M}")
    except SmsGatewayError as exc:
        raise self.retry(exc=exc)""", """    local = timezone.localtime(appt.starts_at, ZoneInfo(appt.clinic.timezone))
    send_sms(appt.patient.phone, f"Reminder: appointment on {local:%d %b at %H:%M}")""")
    s.bash("pytest appointments/tests/test_tasks.py -q", pytest_ok(1, "0.91"), desc="Task test")
    s.bash("python manage.py resend_missed_reminders --since '2026-03-18 20:00' --dry-run", "Would resend 61 reminders (appointments 2026-03-19 08:00 .. 2026-03-20 18:30)\n",
           desc="Dry run of the resend")
    s.stop("send_reminder now uses autoretry_for=(SmsGatewayError,) with max_retries=5 and retry_backoff=30 "
           "(30, 60, 120, 240, 480 s, capped at retry_backoff_max=600, with jitter): about 15 minutes of cover "
           "instead of 3. The dry run finds the 61 reminders lost last night; run it without --dry-run to resend.")
    s.prompt("run the resend for real and commit")
    s.bash("python manage.py resend_missed_reminders --since '2026-03-18 20:00'", "Queued 61 reminders\n", desc="Resend")
    commit(s, "reminders: 5 retries with exponential backoff (max 10 min)", ["appointments/tasks.py"], "b06c2da", 9, 5)
    s.stop("Queued the 61 missed reminders and committed b06c2da.")
    s.end()

    h.q("fix_location", "Where did we fix the N+1 queries on the appointments endpoint?", "appointments slow queries",
        "appointments/views.py get_queryset: select_related('patient', 'doctor', 'room').", ["appointments/views.py", "select_related"], [e_nplus1])
    h.q("failed_command", "What did migrate complain about after merging the room booking branch?", "migrate conflict",
        "CommandError: Conflicting migrations detected (0014_reminder_sent_at and 0014_room_booking); fixed with makemigrations --merge.",
        ["Conflicting migrations"], [e_migconf])
    h.q("knowledge_update", "How many times does the reminder SMS task retry now?", "reminder task retries",
        "5 retries with exponential backoff (retry_backoff=30, capped at 600 s), was 3 retries 60 s apart.",
        ["max_retries=5"], [e_retry5])
    h.q("temporal", "What retry policy did we first give the reminder task?", "reminder task retry",
        "max_retries=3 with default_retry_delay=60 on SmsGatewayError.", ["max_retries=3"], [e_retry3])
    h.q("decision", "Why did we move the appointments list to cursor pagination?", "appointments cursor pagination",
        "Front desk saw duplicates while scrolling as bookings came in, and deep pages were slow; count goes away.",
        ["duplicates"], [e_p_cursor])
    h.q("failed_command", "Which test failed after the pagination change and why?", "pagination test failure",
        "test_list_appointments_paginates: KeyError 'count' (CursorPagination has no count).", ["KeyError: 'count'"], [e_keyerr])
    h.q("fix_location", "Where did we fix reminders showing the wrong hour for Lisbon patients?", "reminder wrong time",
        "appointments/booking.py (aware datetimes in the clinic timezone) and appointments/tasks.py (localtime in the SMS).",
        ["appointments/booking.py", "appointments/tasks.py"], [e_tzfix, e_smslocal])
    h.q("temporal", "How many reminders failed during the SMS gateway outage?", "sms outage reminders",
        "About 60: the prompt reported ~60 unsent reminders and the worker log shows 61 MaxRetriesExceededError give-ups.", ["MaxRetriesExceededError", "about 60 reminders"], [e_p_outage, e_outage])
    h.q("file_history", "What migration did we add to resolve the conflict?", "merge migration",
        "appointments/migrations/0015_merge_20260227_0951.py from makemigrations --merge.", ["0015_merge_20260227_0951"], [e_merge])
