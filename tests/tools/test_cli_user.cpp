// The CLI as a new user meets it (issue 45): help and errors that read as written, a net that
// does not fit the default data refused, progress through an evaluation, the log before the
// first step, the model's and the trace's defaults, a summary that claims no accuracy it did
// not measure, `easel runs`, `easel completion`, --lr-policy cosine with --lr-warmup and
// --eval-images. Every refusal: exit 2, one line naming the flag, nothing written.
#include <gtest/gtest.h>
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;

fs::path tmp_dir(const std::string& name) {
  return easel_test::tmp_dir("user", name);
}

Out easel(const std::string& args, const std::string& env = "") {
  return easel_test::run_easel(args, env, "user");
}

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// A refusal as the README promises it: exit 2, one line on stderr naming `flag`, and `out`
// not written.
void expect_refused(const Out& o, const std::string& flag, const fs::path& out) {
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find(flag), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(out)) << out;
}

const char* kTiny =
    " --net mlp --data synthetic:512:1x8x8:4 --iterations 40 --eval-every 20 --batch 16"
    " --groups 2 --threads-per-group 1 --oversubscribe --progress none --log-level warn";

// --help shows a flag pair's default, not the value its second name sets; range errors read
// as the numbers were written; a typo'd flag or command is named with the nearest real one.
TEST(CliUser, HelpAndErrorsReadAsWritten) {
  Out o = easel("train --help");
  EXPECT_EQ(o.out.find("{false}"), std::string::npos) << o.out;
  for (const char* pair :
       {"--prefetch,--no-prefetch (default: on)", "--checkpoint,--no-checkpoint (default: on)"})
    EXPECT_NE(o.out.find(pair), std::string::npos) << pair << "\n" << o.out;
  o = easel("train --epochs 1e9");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err, "easel: --epochs: 1e+09 is out of range (0, 1e+06]\n");
  o = easel("train --momentum 2");
  EXPECT_EQ(o.err, "easel: --momentum: 2 is out of range [0, 1]\n");
  o = easel("train --lr 20");
  EXPECT_EQ(o.err, "easel: --lr: 20 is out of range (0, 10]\n");
  o = easel("train --itrations 10");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "easel: --itrations: no such flag of easel train (did you mean --iterations?) (see "
            "easel train --help)\n");
  o = easel("topology --gropus 2");
  EXPECT_NE(o.err.find("--gropus: no such flag of easel topology (did you mean --groups?)"),
            std::string::npos)
      << o.err;
  o = easel("train --frobnicate=3");  // nothing near: no guess
  EXPECT_EQ(o.err, "easel: --frobnicate: no such flag of easel train (see easel train --help)\n");
  o = easel("data pack --ovewrite");  // a command's own command: its flags
  EXPECT_NE(o.err.find("--ovewrite: no such flag of easel data pack (did you mean --overwrite?)"),
            std::string::npos)
      << o.err;
  o = easel("sweep --itrations 4 --set algo=sgd");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("(did you mean --iterations?)"), std::string::npos) << o.err;
  o = easel("trian --iterations 1");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("unknown command 'trian' (did you mean train?) (commands: "),
            std::string::npos)
      << o.err;
}

// A built-in net whose input is not Fashion-MNIST's, without --data, would be built for
// 1x28x28 images: refused, naming --net, --data and what to pass. With --data (or a config
// file's) it runs.
TEST(CliUser, NetThatDoesNotFitTheDefaultDataIsRefused) {
  const fs::path d = tmp_dir("net_data");
  for (const char* net : {"resnet18", "cifar10-quick"}) {
    const Out o =
        easel(std::string("train --net ") + net + " --iterations 1 --out " + (d / "run").string());
    expect_refused(o, "--net " + std::string(net) + " takes ", d / "run");
    EXPECT_NE(o.err.find("pass --data"), std::string::npos) << o.err;
  }
  const Out o = easel("train --net resnet18 --iterations 1 --out " + (d / "run").string());
  EXPECT_NE(o.err.find("3x224x224 images in 1000 classes"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("synthetic:1024:3x224x224:1000"), std::string::npos) << o.err;
  Out given = easel(
      "train --net cifar10-quick --data synthetic:64:3x32x32:10 --iterations 1 "
      "--batch 8 --groups 1 --progress none --out " +
      (d / "given").string());
  EXPECT_EQ(given.code, 0) << given.err;
  std::ofstream(d / "c.toml") << "data = \"synthetic:64:3x32x32:10\"\n";
  const Out ok = easel("train --config " + (d / "c.toml").string() +
                       " --net cifar10-quick --iterations 1 --batch 8 --groups 1 "
                       "--progress none --out " +
                       (d / "ok").string());
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// An evaluation reports its progress: the bar says how many test images are done.
TEST(CliUser, EvaluationShowsProgress) {
  const fs::path d = tmp_dir("eval_progress");
  const Out o = easel(
      "train --net lenet --data synthetic:64000:1x28x28:10 --iterations 1 --batch 16 --groups 1 "
      "--threads-per-group 1 --progress bar --out " +
      (d / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("evaluating: "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("/16000 test images after step "), std::string::npos) << o.err;
}

// Before the first step: the collective's choice only for an algorithm that runs collectives,
// hbw-preferred's fallback to DRAM once, and each layer's kernel only at debug (summary.json
// has them).
TEST(CliUser, LogBeforeTheFirstStepSaysWhatApplies) {
  const fs::path d = tmp_dir("prestep");
  const std::string two =
      " --net mlp --data synthetic:256:1x8x8:4 --iterations 2 --batch 8 --groups 2 "
      "--threads-per-group 1 --oversubscribe --progress none --log-level info --out ";
  Out o = easel("train --algo async-easgd" + two + (d / "a").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err.find("collective auto"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("[easel:net]"), std::string::npos) << o.err;
  o = easel("train --algo sync-sgd" + two + (d / "b").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("collective auto"), std::string::npos) << o.err;
  // Without MEMKIND_HBW_NODES (the suite's marks node 0 high-bandwidth): the fallback applies.
  o = easel("train --algo sync-sgd --placement hbw-preferred" + two + (d / "c").string(),
            "env -u MEMKIND_HBW_NODES ");
  ASSERT_EQ(o.code, 0) << o.err;
  size_t said = 0;
  for (size_t at = o.err.find("hbw-preferred:"); at != std::string::npos;
       at = o.err.find("hbw-preferred:", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << o.err;
}

// easel model's threads per group follow train's derivation (the machine's cores split over
// the groups); plan's --batch is the whole run's.
TEST(CliUser, ModelAndPlanDefaultsAreTrains) {
  Out o = easel("model --machine knl-7250 --groups 4 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["threads_per_group"], 17);
  o = easel("model --machine knl-7250 --groups 4 --threads-per-group 2 --json");
  EXPECT_EQ(nlohmann::json::parse(o.out)["threads_per_group"], 2);
  o = easel("plan --help");
  EXPECT_NE(o.out.find("mini-batch of the whole run, split evenly"), std::string::npos) << o.out;
}

// --trace NAME lands in --out; a path with a '/' is taken as it is.
TEST(CliUser, TraceGoesIntoTheRunDirectory) {
  const fs::path d = tmp_dir("trace_out");
  Out o = easel("train" + std::string(kTiny) + " --trace t.json --out " + (d / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(d / "run" / "t.json"));
  EXPECT_FALSE(fs::exists("t.json"));
  o = easel("train" + std::string(kTiny) + " --trace " + (d / "elsewhere.json").string() +
            " --out " + (d / "run2").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(d / "elsewhere.json"));
}

// A described machine's plan starts its threads here: more than this process's cpus need
// --oversubscribe.
TEST(CliUser, DescribedMachineNeedsOversubscribe) {
  const fs::path d = tmp_dir("described");
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string xml =
      std::string(root != nullptr ? root : ".") + "/tests/engine/topologies/knl-snc4-flat.xml";
  const Out o = easel(
      "train --net mlp --data synthetic:64:1x8x8:4 --iterations 1 --batch 8 "
      "--algo sync-easgd --groups 4 --progress none --log-level warn --out " +
          (d / "run").string(),
      "EASEL_TOPOLOGY_XML='" + xml + "' ");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("--oversubscribe: the plan for the machine"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "run" / "summary.json"));
}

// A run interrupted before its first evaluation claims no accuracy: null, with its steps and
// images; `easel runs` lists it interrupted and resumable beside a finished run.
TEST(CliUser, InterruptedBeforeAnEvaluationClaimsNoAccuracy) {
  const fs::path d = tmp_dir("interrupted");
  const fs::path run = d / "runs" / "cut";
  // No evaluation before the signal: the first would come after 10^8 iterations.
  const std::vector<std::string> args = {"train",
                                         "--net",
                                         "mlp",
                                         "--data",
                                         "synthetic:512:1x8x8:4",
                                         "--batch",
                                         "16",
                                         "--groups",
                                         "1",
                                         "--threads-per-group",
                                         "1",
                                         "--iterations",
                                         "100000000",
                                         "--eval-every",
                                         "100000000",
                                         "--progress",
                                         "lines",
                                         "--out",
                                         run.string()};
  const pid_t pid = easel_test::start_easel(args, d);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(easel_test::wait_for_lines(d / "out", 1)) << slurp(d / "err");  // started
  ::usleep(300000);
  ::kill(pid, SIGINT);
  ASSERT_EQ(easel_test::wait_exit(pid), 130) << slurp(d / "err");
  const auto s = nlohmann::json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(s["stopped"], "interrupted");
  EXPECT_TRUE(s["test_accuracy"].is_null()) << s["test_accuracy"];
  EXPECT_TRUE(s["best_accuracy"].is_null());
  EXPECT_EQ(s["evaluations"], 0);
  ASSERT_GT(s["steps"].get<int64_t>(), 0);
  EXPECT_EQ(s["images"].get<int64_t>(), s["steps"].get<int64_t>() * 16);
  Out o = easel("train" + std::string(kTiny) + " --out " + (d / "runs" / "whole").string());
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel("runs " + (d / "runs").string());
  ASSERT_EQ(o.code, 0) << o.err;
  std::istringstream rows(o.out);
  std::string header, cut, whole;
  std::getline(rows, header);
  std::getline(rows, cut);
  std::getline(rows, whole);
  for (const char* col :
       {"run", "algorithm", "net", "groups", "steps", "accuracy", "state", "resume"})
    EXPECT_NE(header.find(col), std::string::npos) << header;
  EXPECT_NE(cut.find("cut "), std::string::npos) << o.out;
  EXPECT_NE(cut.find(" - "), std::string::npos) << cut;  // no accuracy
  EXPECT_NE(cut.find("interrupted"), std::string::npos) << cut;
  EXPECT_NE(cut.find("yes"), std::string::npos) << cut;
  EXPECT_NE(whole.find("finished"), std::string::npos) << whole;
  o = easel("runs " + (d / "runs").string() + " --json");
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["state"], "finished");
  EXPECT_EQ(j["runs"][1]["steps"], 40);
  EXPECT_TRUE(j["runs"][1]["test_accuracy"].is_number());
  EXPECT_TRUE(j["runs"][0]["test_accuracy"].is_null());
  o = easel("runs " + (d / "nowhere").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
}

// The completion script covers every command and flag: bash's function, run as bash runs it.
TEST(CliUser, CompletionComesFromTheFlagTable) {
  const fs::path d = tmp_dir("completion");
  const Out o = easel("completion bash");
  ASSERT_EQ(o.code, 0) << o.err;
  std::ofstream(d / "easel.bash") << o.out;
  const auto complete = [&](const std::string& line) {
    std::ofstream(d / "probe.sh") << "source " << (d / "easel.bash").string() << "\n"
                                  << "COMP_WORDS=(" << line << ")\n"
                                  << "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                                  << "_easel\necho \"${COMPREPLY[*]}\"\n";
    const std::string cmd =
        "bash " + (d / "probe.sh").string() + " >" + (d / "reply").string() + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return slurp(d / "reply");
  };
  EXPECT_NE(complete("easel tr").find("train"), std::string::npos);
  EXPECT_NE(complete("easel train --lr-").find("--lr-warmup"), std::string::npos);
  EXPECT_NE(complete("easel train --no-p").find("--no-prefetch"), std::string::npos);
  EXPECT_NE(complete("easel train --algo dil").find("diloco"), std::string::npos);
  EXPECT_NE(complete("easel train --lr-policy co").find("cosine"), std::string::npos);
  EXPECT_NE(complete("easel model --net res").find("resnet18 resnet50"), std::string::npos);
  EXPECT_NE(complete("easel data p").find("pack"), std::string::npos);
  EXPECT_NE(complete("easel data pack --ov").find("--overwrite"), std::string::npos);
  EXPECT_NE(complete("easel sweep --se").find("--set"), std::string::npos);
  EXPECT_NE(complete("easel sweep report --b").find("--by"), std::string::npos);
  EXPECT_NE(complete("easel runs --j").find("--json"), std::string::npos);
  EXPECT_EQ(complete("easel train --data s"), "\n");  // a path: the shell's own files
  const Out zsh = easel("completion zsh");
  ASSERT_EQ(zsh.code, 0);
  EXPECT_NE(zsh.out.find("bashcompinit"), std::string::npos);
  EXPECT_NE(zsh.out.find("--eval-images"), std::string::npos);
  const Out bad = easel("completion fish");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
}

// --lr-policy cosine with --lr-warmup trains; --eval-images evaluates that many test images.
TEST(CliUser, CosineWarmupAndPartialEvaluation) {
  const fs::path d = tmp_dir("cosine");
  Out o = easel("train" + std::string(kTiny) +
                " --algo sync-sgd --lr-policy cosine --lr-warmup 10 --eval-images 50 --out " +
                (d / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  std::istringstream m(slurp(d / "run" / "metrics.jsonl"));
  std::string line;
  int records = 0;
  while (std::getline(m, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["test_images"], 50) << line;
    ++records;
  }
  EXPECT_EQ(records, 2);
  const auto c = nlohmann::json::parse(slurp(d / "run" / "config.json"));
  EXPECT_EQ(c["lr-policy"], "cosine");
  EXPECT_EQ(c["lr-warmup"], 10);
  for (const auto& [args, flag] :
       std::vector<std::pair<std::string, std::string>>{{" --eval-images -1", "--eval-images"},
                                                        {" --lr-warmup -5", "--lr-warmup"},
                                                        {" --lr-policy cosin", "--lr-policy"}})
    expect_refused(easel("train" + std::string(kTiny) + args + " --out " + (d / "bad").string()),
                   flag, d / "bad");
}

}  // namespace
