// A Node.js orchestrator of tickwork, as another team would write one: @grpc/grpc-js and
// @grpc/proto-loader over the .proto files of protos/ (and the google.rpc ones for error
// details). It prints one JSON object of what it saw; tests/test_node_orchestrator.py runs
// it against a real `tickwork serve` and checks it.
//
// Environment:
//   TICKWORK_ADDRESS   HOST:PORT of the service (required)
//   TICKWORK_TOKEN     bearer token, sent as `authorization: Bearer ...` (optional)
//   TICKWORK_CA_FILE   PEM of the CA that signed the server's certificate: TLS (optional)
//   GOOGLE_PROTOS_DIR  a directory holding google/rpc/status.proto, error_details.proto and
//                      google/api/field_behavior.proto (the googleapis-common-protos Python
//                      package installs them)
"use strict";

const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const protobuf = require("protobufjs");

const PROTOS = path.resolve(__dirname, "..", "..", "protos");
const GOOGLE = process.env.GOOGLE_PROTOS_DIR;
const ADDRESS = process.env.TICKWORK_ADDRESS;
const TOKEN = process.env.TICKWORK_TOKEN || "";
const CA_FILE = process.env.TICKWORK_CA_FILE || "";
const DEADLINE_MS = 30000;

// int64 as strings (JSON cannot hold them exactly), enums by their full names, fields as
// the .proto spells them. The protos import google/api/field_behavior.proto, which
// googleapis-common-protos installs beside the google.rpc ones.
const LOAD_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const definition = protoLoader.loadSync(
  ["tickwork/v1/task.proto", "tickwork/v1/job.proto"],
  { ...LOAD_OPTIONS, includeDirs: [PROTOS, GOOGLE] },
);
const v1 = grpc.loadPackageDefinition(definition).tickwork.v1;

// The error details: a google.rpc.Status in the `grpc-status-details-bin` trailer.
const rpcRoot = new protobuf.Root();
rpcRoot.resolvePath = (_origin, target) => path.join(GOOGLE, target);
rpcRoot.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"], { keepCase: true });
rpcRoot.resolveAll();
const Status = rpcRoot.lookupType("google.rpc.Status");

function details(err) {
  const raw = err.metadata && err.metadata.get("grpc-status-details-bin")[0];
  if (!raw) return [];
  return Status.decode(raw).details.map((any) => {
    const name = any.type_url.split("/").pop();
    const type = rpcRoot.lookupType(name);
    return { type: name, ...type.toObject(type.decode(any.value), { defaults: false }) };
  });
}

const credentials = CA_FILE
  ? grpc.credentials.createSsl(fs.readFileSync(CA_FILE))
  : grpc.credentials.createInsecure();
const tasks = new v1.TaskService(ADDRESS, credentials);
const jobs = new v1.JobService(ADDRESS, credentials);

function metadata() {
  const md = new grpc.Metadata();
  if (TOKEN) md.add("authorization", `Bearer ${TOKEN}`);
  return md;
}

function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(), { deadline: Date.now() + DEADLINE_MS }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

// A JSON value as a google.protobuf.Value message (proto-loader wants the message form).
function toValue(value) {
  if (value === null) return { nullValue: "NULL_VALUE" };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  if (typeof value === "object") return { structValue: toStruct(value) };
  if (typeof value === "number") return { numberValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  return { stringValue: String(value) };
}

function toStruct(object) {
  const fields = {};
  for (const [key, value] of Object.entries(object)) fields[key] = toValue(value);
  return { fields };
}

const ENDED = ["JOB_STATUS_SUCCEEDED", "JOB_STATUS_FAILED", "JOB_STATUS_ABORTED", "JOB_STATUS_CANCELLED"];

// WatchJob until `until(job)` is true (default: the job ended); the statuses seen, in order
// without repeats, and the last job.
function watch(jobId, until = (job) => ENDED.includes(job.status)) {
  return new Promise((resolve, reject) => {
    const seen = [];
    let done = false;
    const stream = jobs.WatchJob({ job_id: jobId }, metadata(), { deadline: Date.now() + DEADLINE_MS });
    stream.on("data", ({ job }) => {
      if (seen[seen.length - 1] !== job.status) seen.push(job.status);
      if (!done && until(job)) {
        done = true;
        stream.cancel();
        resolve({ statuses: seen, job });
      }
    });
    stream.on("error", (err) => {
      if (!done) reject(err);
    });
    stream.on("end", () => {
      if (!done) reject(new Error(`WatchJob ${jobId} ended before the condition`));
    });
  });
}

async function main() {
  const seen = {};
  const created = await call(tasks, "CreateTask", {
    task: {
      name: "node-echo",
      handler: "shell",
      params: toStruct({ argv: ["sh", "-c", "sleep 0.5; echo from node"] }),
    },
    request_id: "node-create-echo",
  });
  const taskId = created.task.id;
  seen.create = { id: taskId, id_type: typeof taskId, enabled: created.task.enabled };

  // RunTasks twice with one request_id: one job; the repeat says so.
  const request = { task_ids: [taskId], trigger: "TRIGGER_API", request_id: "node-run-1" };
  const first = await call(tasks, "RunTasks", request);
  const again = await call(tasks, "RunTasks", request);
  seen.run = {
    job_ids: [first.runs[0].job_id, again.runs[0].job_id],
    repeated: [first.repeated_request, again.repeated_request],
  };

  const watched = await watch(first.runs[0].job_id);
  seen.watch = {
    statuses: watched.statuses,
    status: watched.job.status,
    output: watched.job.output_tail.trim(),
    trigger: watched.job.trigger,
  };

  // Bad input: INVALID_ARGUMENT with a google.rpc.BadRequest naming the field.
  try {
    await call(tasks, "CreateTask", {
      task: {
        name: "node-bad",
        handler: "shell",
        params: toStruct({ argv: ["true"] }),
        retry_policy: { max_attempts: 1000 },
      },
    });
    seen.bad_request = { error: "none" };
  } catch (err) {
    const found = details(err);
    const badRequest = found.find((d) => d.type === "google.rpc.BadRequest");
    const info = found.find((d) => d.type === "google.rpc.ErrorInfo");
    seen.bad_request = {
      code: grpc.status[err.code],
      reason: info && info.reason,
      domain: info && info.domain,
      field_violations: badRequest ? badRequest.field_violations : [],
    };
  }

  // A second task that runs until it is aborted.
  const long = await call(tasks, "CreateTask", {
    task: { name: "node-long", handler: "shell", params: toStruct({ argv: ["sleep", "60"] }) },
  });
  const [longRun] = (await call(tasks, "RunTasks", { task_names: ["node-long"] })).runs;
  await watch(longRun.job_id, (job) => job.status === "JOB_STATUS_RUNNING");
  const aborted = await call(tasks, "AbortTasks", {
    task_ids: [long.task.id],
    request_id: "node-abort-1",
  });
  const abortWatch = await watch(longRun.job_id);
  seen.abort = {
    action: aborted.aborts[0].action,
    job_id: aborted.aborts[0].job_id,
    status: abortWatch.job.status,
    error: abortWatch.job.error,
  };

  // ListJobs one job a page, following next_page_token to the end.
  const ids = [];
  let pageToken = "";
  let pages = 0;
  do {
    const page = await call(jobs, "ListJobs", { page_size: 1, page_token: pageToken });
    ids.push(...page.jobs.map((job) => job.id));
    pageToken = page.next_page_token;
    pages += 1;
  } while (pageToken && pages < 100);
  const succeeded = await call(jobs, "ListJobs", { statuses: ["JOB_STATUS_SUCCEEDED"] });
  seen.list = { pages, ids, succeeded: succeeded.jobs.map((job) => job.id) };
  return seen;
}

main().then(
  (seen) => {
    process.stdout.write(`${JSON.stringify(seen)}\n`);
    process.exit(0);
  },
  (err) => {
    process.stderr.write(`orchestrator failed: ${err.stack || err}\n`);
    process.exit(1);
  },
);
