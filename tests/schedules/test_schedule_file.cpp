// Schedules read from a file (schedules/schedule_file.h): both formats read back what ppbench
// writes for every family, PyTorch's CSV as torch.distributed.pipelining writes it, and broken
// files refused with the file's line, the rank and the action.
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "schedules/registry.h"
#include "schedules/schedule_file.h"
#include "schedules/validate.h"

namespace ppbench {
namespace {

using Format = ScheduleFileFormat;

ScheduleFile parse(const std::string& text, Format f = Format::kText) {
  return parse_schedule_file(text, "f.txt", f);
}

// The message of whatever parsing and validating `text` throws ("" when it is sound).
std::string error_of(const std::string& text, Format f = Format::kText) {
  try {
    validate_file(parse(text, f));
  } catch (const UsageError& e) {
    return std::string("usage: ") + e.what();
  } catch (const InvalidSchedule& e) {
    return std::string("invalid: ") + e.what();
  }
  return "";
}

void expect_same(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.params.devices, b.params.devices);
  EXPECT_EQ(a.params.microbatches, b.params.microbatches);
}

TEST(ScheduleFile, EveryFamilyReadsBackFromTextAndCsv) {
  for (const ScheduleInfo& info : all_schedules()) {
    SCOPED_TRACE(std::string(info.name));
    const Schedule s = generate({std::string(info.name), 4, 8});
    const ScheduleFile text = parse(to_schedule_text(s), Format::kText);
    expect_same(text.schedule, s);
    EXPECT_NO_THROW(validate_file(text));
    EXPECT_EQ(text.schedule.params.name, "file:f.txt");
    const std::string csv = to_pytorch_csv(s);
    const ScheduleFile back = parse(csv, detect_format("x", csv));
    expect_same(back.schedule, s);
    // And the text form of what the CSV gave is the original text.
    EXPECT_EQ(to_schedule_text(back.schedule), to_schedule_text(s));
  }
}

TEST(ScheduleFile, GoldenCsvOfGPipe) {
  const Schedule s = generate({"gpipe", 2, 2});
  EXPECT_EQ(to_pytorch_csv(s), "0F0,0F1,0B1,0B0\n1F0,1F1,1B1,1B0\n");
  EXPECT_EQ(to_schedule_text(s), "rank 0: F0.0 F0.1 B0.1 B0.0\nrank 1: F1.0 F1.1 B1.1 B1.0\n");
}

TEST(ScheduleFile, HeadersNameTheLayouts) {
  EXPECT_EQ(to_schedule_text(generate({"interleaved-1f1b", 2, 4, 2})).substr(0, 36),
            "# placement: interleaved v=2\nrank 0:");
  EXPECT_EQ(placement_header_text(Placement::v_shape(3, 1)), "v-shape");
  EXPECT_EQ(placement_header_text(Placement::bidirectional(2, 1, 1)), "bidirectional");
  EXPECT_EQ(placement_header_text(Placement::single_chain(2, {1, 0}, 1)), "stage-ranks 1,0");
  const ScheduleFile f =
      parse("# placement: stage-ranks 1,0\nrank 0: F1.0 B1.0\nrank 1: F0.0 B0.0\n");
  EXPECT_EQ(f.schedule.placement, Placement::single_chain(2, {1, 0}, 1));
  EXPECT_NO_THROW(validate_file(f));
}

TEST(ScheduleFile, ReadsPyTorchCsvWithIdleCellsCommsAndCrLf) {
  // As csv.writer writes a compute_comms dump: \r\n, empty cells for None.
  const std::string csv = "0F0,,0SEND_F0,0RECV_B0,0B0,0UNSHARD\r\n1RECV_F0,1F0,1B0,1SEND_B0,\r\n";
  const ScheduleFile f = parse(csv, detect_format("dump", csv));
  EXPECT_EQ(to_text(f.schedule), "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n");
  EXPECT_EQ(f.skipped_comm, 5u);
  EXPECT_EQ(f.schedule.placement, Placement::linear(2, 1));
  EXPECT_NO_THROW(validate_file(f));
}

// Found by fuzz_schedule_file: a trailing idle rank was written as a blank row, which reads back
// as no rank at all, so D shrank.
TEST(ScheduleFile, IdleRanksReadBackFromCsvWhereverTheyAre) {
  for (const std::string text :
       {"# placement: stage-ranks 1\nrank 0:\nrank 1: F0.0 B0.0\n",
        "# placement: stage-ranks 0\nrank 0: F0.0 B0.0\nrank 1:\n",
        "# placement: stage-ranks 0\nrank 0: F0.0 B0.0\nrank 1:\nrank 2:\n"}) {
    SCOPED_TRACE(text);
    const ScheduleFile f = parse(text);
    ASSERT_NO_THROW(validate_file(f));
    const ScheduleFile back = parse(to_pytorch_csv(f.schedule), Format::kPytorchCsv);
    expect_same(back.schedule, f.schedule);
  }
  // Blank lines between rows are idle ranks; before the first row and after the last, none.
  EXPECT_EQ(parse_pytorch_csv("0F0,0B0\n\n2F0,2B0\n", "f").ranks.size(), 3u);
  EXPECT_EQ(parse_pytorch_csv("# mine\n\n0F0,0B0\n1F0,1B0\n\n\n", "f").ranks.size(), 2u);
  EXPECT_EQ(parse_pytorch_csv(",\n0F0,0B0\n,\n", "f").ranks.size(), 3u);
}

TEST(ScheduleFile, ReadsOverlappedPairsAndInfersTheVShape) {
  const Schedule s = generate({"dualpipev", 2, 4});
  const std::string csv = to_pytorch_csv(s);
  EXPECT_NE(csv.find(")OVERLAP_F_B"), std::string::npos);
  const ScheduleFile f = parse(csv, Format::kPytorchCsv);
  EXPECT_EQ(f.schedule.placement, Placement::v_shape(2, 4));
  // Either half may come first in PyTorch's cell; the forward is the pair's first half here.
  const RankLines one = parse_pytorch_csv("(0F1;3B0)OVERLAP_F_B,(3I0;0F2)OVERLAP_F_B\n", "f");
  ASSERT_EQ(one.ranks.size(), 1u);
  ASSERT_EQ(one.ranks[0].size(), 2u);
  EXPECT_EQ(one.ranks[0][0], Action::pair({Op::F, 0, 1}, {Op::B, 3, 0}));
  EXPECT_EQ(one.ranks[0][1], Action::pair({Op::F, 0, 2}, {Op::I, 3, 0}));
}

TEST(ScheduleFile, DetectsTheFormat) {
  EXPECT_EQ(detect_format("a.csv", "rank 0: F0.0"), Format::kPytorchCsv);
  EXPECT_EQ(detect_format("a.txt", "# x\n\nrank 0: F0.0"), Format::kText);
  EXPECT_EQ(detect_format("a", "# placement: bidirectional\n0F0,0B0"), Format::kPytorchCsv);
}

TEST(ScheduleFile, ValidationNamesTheLineRankAndAction) {
  // A missing W for an I: rank 0 is listed on line 3.
  EXPECT_EQ(error_of("# two ranks, one micro-batch\n\nrank 0: F0.0 I0.0\n"
                     "rank 1: F1.0 I1.0 W1.0\n"),
            "invalid: f.txt:3: invalid schedule: rank 0, action W0.0: missing: I is scheduled "
            "without its W");
  EXPECT_EQ(error_of("rank 0: F0.0 F0.0 B0.0\n"),
            "invalid: f.txt:1: invalid schedule: rank 0, action F0.0: F0.0 appears more than once");
  EXPECT_EQ(error_of("rank 0: F0.0 B0.0\nrank 1: F1.0 F0.0 B1.0\n"),
            "invalid: f.txt:2: invalid schedule: rank 1, action F0.0: stage 0 lives on rank 0");
  // A forward ordered before the backward it needs on the same rank...
  EXPECT_EQ(error_of("rank 0: B0.0 F0.0\n"),
            "invalid: f.txt:1: invalid schedule: rank 0, action B0.0: depends on F0.0, which "
            "this rank runs later at position 1 (this action is at position 0)");
  // ... and two ranks waiting on each other.
  const std::string cycle = error_of("rank 0: F0.0 B0.0 F0.1 B0.1\nrank 1: F1.1 F1.0 B1.0 B1.1\n");
  EXPECT_EQ(cycle.rfind("invalid: f.txt:", 0), 0u) << cycle;
  EXPECT_NE(cycle.find("deadlock: "), std::string::npos) << cycle;
}

TEST(ScheduleFile, BothDirectionsOfABidirectionalFileCarryWork) {
  // Rank 0 runs only chain 0: it was accepted as a two-chain step with 2x parameters.
  EXPECT_EQ(error_of("# placement: bidirectional\nrank 0: F0.0 B0.0\n"),
            "usage: f.txt: chain 1 (stages 1..1) carries no micro-batch (allowed: the "
            "bidirectional placement with work in both directions; for one direction use another "
            "placement)");
  EXPECT_EQ(error_of("# placement: bidirectional\nrank 0: F0.0 B0.0 F1.0 B1.0\n"), "");
}

TEST(ScheduleFile, ABadTokenIsQuotedWholeOnOneLine) {
  // A NUL inside the token once ended the message there; a megabyte token filled the screen.
  const std::string nul = error_of(std::string("rank 0: F0.0\0 B0.0\n", 21));
  EXPECT_NE(nul.find("bad action 'F0.0\\x00': "), std::string::npos) << nul;
  EXPECT_NE(nul.find("(expected e.g. F3.1"), std::string::npos) << nul;
  const std::string long_token = error_of("rank 0: F" + std::string(100000, '1') + ".0\n");
  EXPECT_LT(long_token.size(), 1000u);
  EXPECT_NE(long_token.find("... (100003 bytes)"), std::string::npos) << long_token;
}

TEST(ScheduleFile, ParseErrorsNameTheLine) {
  EXPECT_EQ(error_of("rank 0: F0.0\nrank 1: F1.0 X1.0\n"),
            "usage: f.txt:2: rank 1: bad action 'X1.0': op must be one of F, B, I, W (expected "
            "e.g. F3.1, B0.2, I1.0, W1.0 or (F0.7+B15.3))");
  EXPECT_EQ(error_of("# c\nrank 1: F0.0\n"),
            "usage: f.txt:2: expected 'rank 0: ...' (ranks listed 0, 1, 2, ... one per line), got "
            "'rank 1: F0.0'");
  EXPECT_EQ(error_of("# placement: diagonal\nrank 0: F0.0 B0.0\n"),
            "usage: f.txt:1: unknown placement 'diagonal' (allowed: linear, interleaved v=N, "
            "v-shape, bidirectional, stage-ranks R0,R1,... (stage s on rank Rs))");
  EXPECT_EQ(error_of("rank 0: F0.0 B0.0\n# placement: v-shape\n"),
            "usage: f.txt:2: the placement header must come before the first rank line");
  EXPECT_EQ(error_of("# placement: interleaved v=0\nrank 0: F0.0 B0.0\n"),
            "usage: f.txt:1: placement interleaved needs v=N with N from 1 to 1024 model chunks "
            "per rank, got 'v=0'");
  EXPECT_EQ(error_of("0F0,0B0\n0F1,0X0\n", Format::kPytorchCsv),
            "usage: f.txt:2: rank 1: bad action '0X0': unknown action type (expected e.g. 0F1, "
            "1I0, 2W3, 0B0, (0F1;3B0)OVERLAP_F_B, or a communication action such as 1SEND_F0, "
            "which is skipped)");
  EXPECT_EQ(error_of("0F0,0B0,0F1\n0B1\n", Format::kPytorchCsv),
            "usage: f.txt:2: rank 1, action B0.1: stage 0 already runs on rank 0 (line 1); a "
            "stage lives on one rank");
  EXPECT_EQ(error_of("", Format::kText).rfind("usage: f.txt: no actions", 0), 0u);
}

// A CSV without a header that skips a stage is short of tasks too, but the skipped stage is the
// cause: it is named, on the line of the highest stage (the one that implies it).
TEST(ScheduleFile, MissingStageIsNamedBeforeTheTaskBound) {
  EXPECT_EQ(error_of("0F0,0B0\n2F0,2B0\n", Format::kPytorchCsv),
            "usage: f.txt:2: rank 1, action F2.0: stage 1 is never run, so its rank is unknown "
            "(stages 0..2 must each appear, or a '# placement:' header give their ranks)");
  EXPECT_EQ(error_of("# mine\n1F0,1B0\n", Format::kPytorchCsv)
                .rfind("usage: f.txt:2: rank 0, action F1.0: stage 0 is never run", 0),
            0u);
}

// A file that skips a micro-batch is short of tasks too; the skipped one is named, on the line
// of its chain's highest micro-batch, and in which chain where there are several.
TEST(ScheduleFile, MissingMicrobatchIsNamedBeforeTheTaskBound) {
  EXPECT_EQ(error_of("0F0,0F1,0F3,0B0,0B1,0B3\n", Format::kPytorchCsv),
            "usage: f.txt:1: rank 0, action F0.3: micro-batch 2 is never run (micro-batches "
            "0..3 must each appear)");
  EXPECT_EQ(error_of("rank 0: F0.1 B0.1\nrank 1: F1.1 B1.1\n"),
            "usage: f.txt:1: rank 0, action F0.1: micro-batch 0 is never run (micro-batches "
            "0..1 must each appear)");
  // Chimera's layout: chain 0 runs stages 0..1 down the ranks, chain 1 stages 2..3 up them;
  // chain 1 skips its micro-batch 0.
  EXPECT_EQ(error_of("# placement: bidirectional\nrank 0: F0.0 B0.0 F3.1 B3.1\n"
                     "rank 1: F1.0 B1.0 F2.1 B2.1\n"),
            "usage: f.txt:2: rank 0, action F3.1: micro-batch 0 of chain 1 is never run "
            "(micro-batches 0..1 must each appear)");
}

// A list cut short is not read as a shorter placement.
TEST(ScheduleFile, StageRanksRefuseAnEmptyItemAnywhere) {
  const std::string ranks = "\nrank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n";
  const std::string allowed =
      " (allowed: one rank 0..4095 per stage, comma-separated, e.g. 0,1,1,0)";
  EXPECT_EQ(error_of("# placement: stage-ranks 0,1," + ranks),
            "usage: f.txt:1: placement stage-ranks '0,1,': no rank for stage 2 after the last "
            "comma" +
                allowed);
  EXPECT_EQ(error_of("# placement: stage-ranks 0,,1" + ranks),
            "usage: f.txt:1: placement stage-ranks '0,,1': no rank for stage 1 between two "
            "commas" +
                allowed);
  EXPECT_EQ(error_of("# placement: stage-ranks ,0,1" + ranks),
            "usage: f.txt:1: placement stage-ranks ',0,1': no rank for stage 0 before the first "
            "comma" +
                allowed);
  EXPECT_EQ(error_of("# placement: stage-ranks 0, 1" + ranks), "");
}

// Editors on Windows (and Excel's "CSV UTF-8") put a byte-order mark in front of the first line.
TEST(ScheduleFile, SkipsAByteOrderMarkInBothFormats) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string text = bom + "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n";
  ASSERT_EQ(detect_format("f", text), Format::kText);
  EXPECT_EQ(to_text(parse(text).schedule), text.substr(bom.size()));
  const std::string csv = bom + "0F0,0B0\n1F0,1B0\n";
  EXPECT_EQ(to_text(parse(csv, detect_format("f.csv", csv)).schedule),
            "rank 0: F0.0 B0.0\nrank 1: F1.0 B1.0\n");
  const std::string header =
      bom + "# placement: stage-ranks 1,0\nrank 0: F1.0 B1.0\n" + "rank 1: F0.0 B0.0\n";
  EXPECT_EQ(parse(header).schedule.placement, Placement::single_chain(2, {1, 0}, 1));
}

TEST(ScheduleFile, AbsurdNumbersAreRefusedBeforeAllocating) {
  // The file's bound (4096 ranks x 1024 chunks) is the one named, below what a task can hold
  // (kMaxStageId) and beyond it.
  EXPECT_EQ(error_of("rank 0: F0.0 B0.0 F5000000.0\n"),
            "usage: f.txt:1: rank 0: bad action 'F5000000.0': stage 5000000 is out of range "
            "(allowed: 0..4194303) (expected e.g. F3.1, B0.2, I1.0, W1.0 or (F0.7+B15.3))");
  EXPECT_EQ(error_of("rank 0: F0.0 B0.0 F999999999.0\n"),
            "usage: f.txt:1: rank 0: bad action 'F999999999.0': stage 999999999 is out of range "
            "(allowed: 0..4194303) (expected e.g. F3.1, B0.2, I1.0, W1.0 or (F0.7+B15.3))");
  // A micro-batch number far past the others leaves micro-batches out: named first, found
  // without sizing anything by the number.
  EXPECT_EQ(error_of("rank 0: F0.0 B0.0\nrank 1: F1.999999\n"),
            "usage: f.txt:2: rank 1, action F1.999999: micro-batch 1 is never run (micro-batches "
            "0..999999 must each appear)");
  EXPECT_EQ(error_of("rank 0: F0.0 F0.1\nrank 1: F1.0 F1.1\n"),
            "usage: f.txt:1: rank 0, action F0.1: micro-batch 1 on 2 stages needs 4 (stage, "
            "micro-batch) pairs, at least 8 tasks, but the file has 4 (each pair needs an F and "
            "a B, or an F, an I and a W)");
  // A stage number far past the others leaves stages out: that is named first, and found
  // without sizing anything by the stage number.
  EXPECT_EQ(error_of("0F0,0B0,4000000F0\n", Format::kPytorchCsv),
            "usage: f.txt:1: rank 0, action F4000000.0: stage 1 is never run, so its rank is "
            "unknown (stages 0..4000000 must each appear, or a '# placement:' header give their "
            "ranks)");
  EXPECT_EQ(error_of("0F0,1F0,2F0\n", Format::kPytorchCsv),
            "usage: f.txt:1: rank 0, action F2.0: stage 2 makes 3 stages, which needs 3 (stage, "
            "micro-batch) pairs, at least 6 tasks, but the file has 3 (each pair needs an F and "
            "a B, or an F, an I and a W)");
  EXPECT_EQ(error_of("0F99999999999\n", Format::kPytorchCsv),
            "usage: f.txt:1: rank 0: bad action '0F99999999999': micro-batch 99999999999 is out "
            "of range (allowed: 0..1048575) (expected e.g. 0F1, 1I0, 2W3, 0B0, "
            "(0F1;3B0)OVERLAP_F_B, or a communication action such as 1SEND_F0, which is "
            "skipped)");
}

}  // namespace
}  // namespace ppbench
