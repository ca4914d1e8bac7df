"""check_expected.py finds what is wrong in an expected.toml (run: python3 -m unittest discover
tests/distributed). Each test copies a real fixture, breaks one thing, and reads the problems."""

import shutil
import tempfile
import unittest
from pathlib import Path

from check_expected import FIXTURES, Checker, taxonomy_classes

GENERATED = FIXTURES / "raise-index-torch2.15.0-gloo-n4"
PUBLIC = FIXTURES / "public-basicsr-737"


class BrokenFixture(unittest.TestCase):
    def problems(self, fixture, old=None, new=None):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / fixture.name
            shutil.copytree(fixture, copy)
            if old is not None:
                path = copy / "expected.toml"
                text = path.read_text()
                self.assertIn(old, text)
                path.write_text(text.replace(old, new, 1))
            return Checker(copy, taxonomy_classes()).check()

    def assertProblem(self, problems, words):
        self.assertTrue(any(words in p for p in problems), f"{words!r} not in {problems}")

    def test_the_fixtures_as_committed_have_no_problem(self):
        self.assertEqual(self.problems(GENERATED), [])
        self.assertEqual(self.problems(PUBLIC), [])

    def test_a_rank_outside_the_world_is_found(self):
        found = self.problems(GENERATED, "cascade = [0, 1, 3]", "cascade = [0, 1, 3, 4]")
        self.assertProblem(found, "rank 4 is outside the world of 4")

    def test_a_rank_both_root_and_cascade_is_found(self):
        found = self.problems(GENERATED, "cascade = [0, 1, 3]", "cascade = [0, 1, 2, 3]")
        self.assertProblem(found, "both root and cascade")

    def test_a_root_host_or_local_rank_the_root_did_not_print_is_found(self):
        found = self.problems(GENERATED, "local_rank = 2", "local_rank = 1")
        self.assertProblem(found, "root rank 2 printed ('host-a', 2)")

    def test_evidence_that_is_in_no_file_is_found(self):
        found = self.problems(GENERATED, "with size 256", "with size 257")
        self.assertProblem(found, "is in none of the files")

    def test_a_class_outside_the_taxonomy_is_found(self):
        found = self.problems(GENERATED, 'class = "cpu.index_error"', 'class = "cpu.index"')
        self.assertProblem(found, "not in rules/taxonomy.toml")

    def test_a_flight_recorder_sequence_number_the_dumps_do_not_end_in_is_found(self):
        found = self.problems(GENERATED, "fr_seq = 4", "fr_seq = 3")
        self.assertProblem(found, "flight recorder ends in allreduce #3")

    def test_a_watchdog_sequence_number_left_out_or_wrong_is_found(self):
        self.assertProblem(self.problems(PUBLIC, "watchdog_seq = 808\n", ""), "watchdog_seq is missing")
        self.assertProblem(self.problems(PUBLIC, "watchdog_seq = 808", "watchdog_seq = 807"),
                           "no file shows 'SeqNum=807, OpType=ALLREDUCE'")

    def test_only_a_public_log_may_leave_its_root_unknown(self):
        found = self.problems(GENERATED, "ranks = [2]", "ranks = []")
        self.assertProblem(found, "only a public log may leave its root unknown")

    def test_a_public_log_without_its_source_is_found(self):
        found = self.problems(PUBLIC, 'source = "https://', 'origin_url = "https://')
        self.assertProblem(found, "[job] source is missing")


if __name__ == "__main__":
    unittest.main()
