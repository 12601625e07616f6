// Validates the rendered Kubernetes manifests (kubectl kustomize of each
// overlay and example) against the Kubernetes and prometheus-operator API
// schemas, then checks what a schema cannot: that the pieces fit together
// and fit sortd.
//   node validate_manifests.mjs
// Environment: REPO (checkout), KUBECTL, SORTD_BIN, NODE_MODULES (the npm
// tools from scripts/install-deps.sh).
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const REPO = env("REPO");
const KUBECTL = env("KUBECTL");
const SORTD_BIN = env("SORTD_BIN");
const NODE_MODULES = env("NODE_MODULES");
const yaml = (await import(pathToFileURL(join(NODE_MODULES, "js-yaml/index.js")))).default;

let failures = 0;
let checks = 0;
function check(condition, what) {
  checks++;
  if (!condition) {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

// ---- schema validation ---------------------------------------------------
// apiVersion + kind -> the model class of kubernetes-models (core and
// built-in groups) or @kubernetes-models/prometheus-operator.
async function modelFor(apiVersion, kind) {
  const packageDir = apiVersion.startsWith("monitoring.coreos.com/")
    ? "@kubernetes-models/prometheus-operator"
    : "kubernetes-models";
  const file = join(NODE_MODULES, packageDir, apiVersion, `${kind}.js`);
  if (!existsSync(file)) return null;
  return (await import(pathToFileURL(file)))[kind];
}

async function schemaErrors(object) {
  const Model = await modelFor(object.apiVersion, object.kind);
  if (Model === null) return `no schema for ${object.apiVersion} ${object.kind}`;
  try {
    new Model(object).validate();
    return null;
  } catch (error) {
    return String(error.message || error).slice(0, 2000);
  }
}

// The validator itself must catch a broken object, or a green run means
// nothing: a Deployment with a string replica count and a probe without a
// port must both be refused.
async function selfTest(objects) {
  const sortd = (o) => o.kind === "Deployment" && o.metadata.name === "sortd";
  const deployment = structuredClone(objects.find(sortd));
  deployment.spec.replicas = "two";
  check((await schemaErrors(deployment)) !== null, "schema check refuses replicas: \"two\"");
  const probe = structuredClone(objects.find(sortd));
  delete probe.spec.template.spec.containers[0].readinessProbe.grpc.port;
  check((await schemaErrors(probe)) !== null, "schema check refuses a gRPC probe without a port");
  const monitor = { apiVersion: "monitoring.coreos.com/v1", kind: "ServiceMonitor",
                    metadata: { name: "x" }, spec: { endpoints: "none" } };
  check((await schemaErrors(monitor)) !== null, "schema check refuses a malformed ServiceMonitor");
}

// ---- helpers -------------------------------------------------------------
const render = (dir) => yaml.loadAll(
  execFileSync(KUBECTL, ["kustomize", join(REPO, dir)], { encoding: "utf8" })).filter(Boolean);
const only = (objects, kind, name) => {
  const found = objects.filter((o) => o.kind === kind && (!name || o.metadata.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name || ""}, found ${found.length}`);
  return found[0];
};
const matches = (selector, labels) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);
// "--name=value" lines of a flagfile (comments and blank lines skipped).
const parseFlags = (text) => Object.fromEntries(text.split("\n")
  .map((line) => line.trim()).filter((line) => line && !line.startsWith("#"))
  .map((line) => {
    const m = /^--([A-Za-z0-9_]+)(?:=(.*))?$/.exec(line);
    if (!m) throw new Error(`not a flag line: ${line}`);
    return [m[1], m[2] ?? "true"];
  }));
// Kubernetes quantities in bytes ("8Gi", "512Mi", "1G", "1024").
const bytes = (quantity) => {
  const m = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity));
  if (!m) throw new Error(`unsupported quantity ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? unit[m[2]] : 1);
};
const seconds = (duration) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(duration);
  if (!m) throw new Error(`unsupported duration ${duration}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
};

// The flags sortd accepts, from its own --helpfull (which exits 1).
const helpfull = spawnSync(SORTD_BIN, ["--helpfull"], { encoding: "utf8" }).stdout;
const knownFlags = new Set([...helpfull.matchAll(/^\s+--([A-Za-z0-9_]+) /gm)].map((m) => m[1]));
check(knownFlags.has("drain_timeout") && knownFlags.has("flagfile"),
      "sortd --helpfull lists its flags");

// The image: its user and exposed ports, from the Dockerfile.
const dockerfile = readFileSync(join(REPO, "Dockerfile"), "utf8");
const imageUser = /^USER\s+(\d+)/m.exec(dockerfile)?.[1];
const exposed = new Set((/^EXPOSE\s+(.+)$/m.exec(dockerfile)?.[1] ?? "").split(/\s+/).map(Number));

// prometheus-adapter: the metric names it serves.
const adapter = yaml.load(readFileSync(join(REPO, "deploy/monitoring/prometheus/adapter-rules.yaml"), "utf8"));
const adapterMetrics = new Map(adapter.rules.custom.map((r) => [r.name.as, r.seriesQuery]));

// Starts sortd with the rendered flagfiles (plus loopback ports, and a
// Unix socket in a temporary directory in place of the pod's path when
// `unixSocket`), scrapes /metrics once it serves, and stops it with
// SIGTERM; returns the scrape, and the socket file's permission bits.
async function runSortdWith(flagfiles, { unixSocket = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "sortd-deploy-"));
  const paths = Object.entries(flagfiles).map(([name, text]) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  });
  const portFile = join(dir, "port");
  const metricsPortFile = join(dir, "metrics_port");
  const socket = join(dir, "sortd.sock");
  const child = spawn(SORTD_BIN, [`--flagfile=${paths.join(",")}`, "--listen=127.0.0.1:0",
    `--port_file=${portFile}`, "--metrics_listen=127.0.0.1:0", `--metrics_port_file=${metricsPortFile}`,
    ...(unixSocket ? [`--unix_socket=${socket}`] : [])],
    { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => { log += d; });
  child.stderr.on("data", (d) => { log += d; });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  try {
    const deadline = Date.now() + 30000;
    while (!existsSync(portFile)) {
      if (child.exitCode !== null) throw new Error(`sortd exited early:\n${log}`);
      if (Date.now() > deadline) throw new Error(`sortd did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const port = readFileSync(metricsPortFile, "utf8").trim();
    const scrape = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const socketMode = unixSocket && existsSync(socket) ? statSync(socket).mode & 0o777 : null;
    child.kill("SIGTERM");
    const code = await exited;
    return { scrape, code, log, socketMode };
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

// Same-host regions (docs/deploy.md, "sortd as a sidecar"): the other
// containers reach sortd through its Unix socket and share its /dev/shm,
// and the memory behind the regions is bounded and paid for.
function checkRegions(where, pod, container, flags) {
  const kinds = (flags.shared_memory ?? "none").split(",").map((k) => k.trim());
  if (kinds.includes("none")) return;
  const mountOf = (c, path) => (c.volumeMounts ?? []).find((m) => m.mountPath === path);
  const volume = (name) => pod.volumes.find((v) => v.name === name);
  const uid = (c) => c.securityContext?.runAsUser ?? pod.securityContext?.runAsUser;
  const socket = flags.unix_socket ?? "";
  check(socket.startsWith("/"), `${where}: --shared_memory is served on a Unix socket (--unix_socket)`);
  const socketDir = socket.slice(0, socket.lastIndexOf("/"));
  const socketMount = mountOf(container, socketDir);
  check(socketMount !== undefined && volume(socketMount.name)?.emptyDir !== undefined,
        `${where}: the socket's directory ${socketDir} is an emptyDir mounted in sortd`);
  const clients = pod.containers.filter((c) => c.name !== container.name &&
                                               mountOf(c, socketDir)?.name === socketMount?.name);
  check(clients.length > 0, `${where}: another container mounts the socket's directory`);
  const mode = parseInt(flags.unix_socket_mode ?? "0660", 8);
  check(pod.securityContext?.fsGroup !== undefined && (mode & 0o060) === 0o060 && (mode & 0o007) === 0,
        `${where}: the socket (mode ${mode.toString(8)}) is for the pod's fsGroup, not for others`);
  if (kinds.includes("system")) {
    const shm = mountOf(container, "/dev/shm");
    const shmVolume = shm && volume(shm.name);
    check(shmVolume?.emptyDir?.medium === "Memory" && shmVolume.emptyDir.sizeLimit !== undefined,
          `${where}: sortd's /dev/shm is a memory-backed emptyDir with a sizeLimit`);
    const limit = shmVolume?.emptyDir?.sizeLimit ? bytes(shmVolume.emptyDir.sizeLimit) : 0;
    check(bytes(flags.max_shm_bytes ?? String(64 * 2 ** 30)) <= limit,
          `${where}: --max_shm_bytes is at most the /dev/shm sizeLimit`);
    for (const c of [container, ...clients]) {
      check(mountOf(c, "/dev/shm")?.name === shm?.name, `${where}: ${c.name} mounts the shared /dev/shm`);
      check(c.resources?.limits?.memory && bytes(c.resources.limits.memory) > limit,
            `${where}: ${c.name}'s memory limit leaves room for the /dev/shm volume (its pages may be charged there)`);
    }
    for (const c of clients) {
      check(uid(c) === uid(container),
            `${where}: ${c.name} runs as sortd's user (shm objects are created owner-only)`);
    }
  }
  if (kinds.includes("cuda")) {
    check(pod.shareProcessNamespace === true,
          `${where}: CUDA IPC handles open only within one PID namespace (shareProcessNamespace)`);
  }
}

// ---- per kustomization ------------------------------------------------------
// `gpu`: GPU scheduling expected (else the CPU engine only); `autoscaled`:
// the HPA is part of it.
async function checkKustomization({ dir, gpu, autoscaled }) {
  const where = dir.replace(/^deploy\/k8s\//, "");
  const objects = render(dir);
  console.log(`${where}: ${objects.length} objects: ${objects.map((o) => o.kind).join(", ")}`);
  for (const object of objects) {
    const errors = await schemaErrors(object);
    check(errors === null, `${where}: ${object.kind} ${object.metadata.name} validates: ${errors}`);
  }
  await selfTest(objects);

  const deployment = only(objects, "Deployment", "sortd");
  const pod = deployment.spec.template.spec;
  const podLabels = deployment.spec.template.metadata.labels;
  check(matches(deployment.spec.selector.matchLabels, podLabels), `${where}: Deployment selects its pods`);
  const container = only(pod.containers.map((c) => ({ ...c, kind: "Container", metadata: { name: c.name } })),
                         "Container", "sortd");
  const ports = new Map(container.ports.map((p) => [p.name, p.containerPort]));
  for (const [portName, port] of ports) {
    check(exposed.has(port), `${where}: container port ${portName} ${port} is EXPOSEd by the image`);
  }
  for (const probeName of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const probe = container[probeName];
    check(probe?.grpc !== undefined, `${where}: ${probeName} is a native gRPC probe`);
    check([...ports.values()].includes(probe?.grpc?.port) && probe?.grpc?.port === ports.get("grpc"),
          `${where}: ${probeName} points at the container's grpc port`);
  }
  check(container.readinessProbe.grpc.service === "sortd.v1.SortService",
        `${where}: readiness asks for sortd.v1.SortService (the service that goes NOT_SERVING on drain)`);

  // Security: non-root (and the image's own user), read-only root, no
  // escalation, no capabilities; for every container of the pod.
  check(pod.securityContext.runAsNonRoot === true && container.securityContext.runAsNonRoot === true,
        `${where}: runAsNonRoot`);
  check(String(pod.securityContext.runAsUser) === imageUser, `${where}: runAsUser is the image's USER ${imageUser}`);
  for (const c of pod.containers) {
    const sc = c.securityContext ?? {};
    check(sc.runAsNonRoot ?? pod.securityContext.runAsNonRoot, `${where}: ${c.name} runs as non-root`);
    check(sc.readOnlyRootFilesystem === true, `${where}: ${c.name}: read-only root filesystem`);
    check(sc.allowPrivilegeEscalation === false, `${where}: ${c.name}: no privilege escalation`);
    check(sc.capabilities?.drop?.includes("ALL"), `${where}: ${c.name}: capabilities dropped`);
    check(c.resources?.requests?.cpu && c.resources?.limits?.memory, `${where}: ${c.name}: resources set`);
  }

  // Flags: the ConfigMap the pod mounts, at the paths --flagfile names.
  const flagsVolume = pod.volumes.find((v) => v.configMap);
  const flagsMap = only(objects, "ConfigMap", flagsVolume.configMap.name);
  const mount = container.volumeMounts.find((m) => m.name === flagsVolume.name).mountPath;
  const flagfileArg = container.args.find((a) => a.startsWith("--flagfile="));
  const flagfilePaths = flagfileArg.slice("--flagfile=".length).split(",");
  const flagfiles = {};
  for (const path of flagfilePaths) {
    const key = path.slice(mount.length + 1);
    check(path.startsWith(`${mount}/`) && key in flagsMap.data,
          `${where}: --flagfile ${path} is a key of the mounted ConfigMap ${flagsMap.metadata.name}`);
    flagfiles[key] = flagsMap.data[key] ?? "";
  }
  const flags = Object.assign({}, ...Object.values(flagfiles).map(parseFlags));
  for (const flag of Object.keys(flags)) {
    check(knownFlags.has(flag), `${where}: --${flag} in the ConfigMap is a flag sortd accepts`);
  }

  // Termination: the grace period outlasts preStop + drain_delay + drain_timeout + drain_linger.
  const preStop = container.lifecycle?.preStop?.exec?.command;
  const preStopSeconds = preStop?.[0] === "sleep" ? Number(preStop[1]) : 0;
  const drain = preStopSeconds + seconds(flags.drain_delay ?? "0s") + seconds(flags.drain_timeout ?? "30s") +
                seconds(flags.drain_linger ?? "1s");
  check(pod.terminationGracePeriodSeconds > drain,
        `${where}: terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > preStop + drain ${drain}`);
  check(flags.max_connection_age !== undefined, `${where}: connections are aged (clients rebalance)`);

  // Services: both select the pods; the headless one has no cluster IP.
  const service = only(objects, "Service", "sortd");
  const headless = only(objects, "Service", "sortd-headless");
  for (const s of [service, headless]) {
    check(matches(s.spec.selector, podLabels), `${where}: Service ${s.metadata.name} selects the pods`);
    for (const p of s.spec.ports) {
      check(ports.has(p.targetPort), `${where}: Service ${s.metadata.name} port ${p.name} targets a container port`);
    }
  }
  check(headless.spec.clusterIP === "None", `${where}: headless Service has clusterIP None`);
  check(headless.spec.ports.some((p) => p.name === "grpc"), `${where}: headless Service carries gRPC`);
  const pdb = only(objects, "PodDisruptionBudget");
  check(matches(pdb.spec.selector.matchLabels, podLabels), `${where}: PDB selects the pods`);

  // Autoscaling: the HPA scales this Deployment on a metric the adapter
  // serves, and sortd exports that series.
  const hpas = objects.filter((o) => o.kind === "HorizontalPodAutoscaler");
  check(hpas.length === (autoscaled ? 1 : 0), `${where}: ${autoscaled ? "one HPA" : "no HPA"}`);
  for (const hpa of hpas) {
    check(hpa.spec.scaleTargetRef.kind === "Deployment" && hpa.spec.scaleTargetRef.name === deployment.metadata.name,
          `${where}: HPA scales the sortd Deployment`);
  }
  const hpaMetrics = hpas.flatMap((hpa) => hpa.spec.metrics.map((m) => m.pods?.metric?.name)).filter(Boolean);
  for (const metric of hpaMetrics) {
    check(adapterMetrics.has(metric), `${where}: HPA metric ${metric} is served by the adapter rule`);
  }

  // Dashboard and rules ConfigMaps hold the files from deploy/monitoring.
  const dashboard = only(objects, "ConfigMap", "sortd-grafana-dashboard");
  check(dashboard.metadata.labels?.grafana_dashboard === "1", `${where}: dashboard is labelled for Grafana`);
  check(dashboard.data["sortd.json"] === readFileSync(join(REPO, "deploy/monitoring/grafana/sortd.json"), "utf8"),
        `${where}: dashboard ConfigMap is deploy/monitoring/grafana/sortd.json`);
  const rules = only(objects, "ConfigMap", "sortd-prometheus-rules");
  check(rules.data["sortd.rules.yml"] === readFileSync(join(REPO, "deploy/monitoring/prometheus/sortd.rules.yml"), "utf8"),
        `${where}: rules ConfigMap is deploy/monitoring/prometheus/sortd.rules.yml`);

  // Monitoring: ServiceMonitor (gpu) or scrape annotations (cpu).
  const monitors = objects.filter((o) => o.kind === "ServiceMonitor");
  const annotations = deployment.spec.template.metadata.annotations ?? {};
  check(monitors.length === 1 || annotations["prometheus.io/scrape"] === "true",
        `${where}: scraped by a ServiceMonitor or by annotations`);
  for (const monitor of monitors) {
    check(matches(monitor.spec.selector.matchLabels, service.metadata.labels),
          `${where}: ServiceMonitor selects the sortd Service`);
    check(monitor.spec.endpoints.every((e) => service.spec.ports.some((p) => p.name === e.port)),
          `${where}: ServiceMonitor endpoints name Service ports`);
  }
  if (annotations["prometheus.io/port"] !== undefined) {
    check(Number(annotations["prometheus.io/port"]) === ports.get("metrics"),
          `${where}: prometheus.io/port is the metrics port`);
  }

  // GPU scheduling only in the gpu overlay, and expect_gpus agrees with it.
  const gpus = Number(container.resources?.limits?.["nvidia.com/gpu"] ?? 0);
  if (gpu) {
    check(gpus >= 1, `${where}: limits nvidia.com/gpu`);
    check(pod.tolerations?.some((t) => t.key === "nvidia.com/gpu"), `${where}: tolerates the GPU taint`);
    check(pod.nodeSelector !== undefined, `${where}: selects GPU nodes`);
    check(Number(flags.expect_gpus) === gpus, `${where}: --expect_gpus equals the nvidia.com/gpu limit`);
  } else {
    check(gpus === 0 && flags.engine === "cpu", `${where}: no GPU asked for, engine=cpu`);
  }

  checkRegions(where, pod, container, flags);

  // The real sortd starts with exactly these flagfiles, exports the HPA's
  // series, and drains cleanly on SIGTERM.
  const unixSocket = flags.unix_socket !== undefined && flags.unix_socket !== "";
  let run;
  try {
    run = await runSortdWith(flagfiles, { unixSocket });
  } catch (error) {
    check(false, `${where}: sortd starts with the rendered flags: ${error.message}`);
    return;
  }
  for (const metric of hpaMetrics) {
    check(new RegExp(`^${metric}[ {]`, "m").test(run.scrape), `${where}: sortd exports ${metric}`);
  }
  if (unixSocket) {
    const mode = parseInt(flags.unix_socket_mode ?? "0660", 8);
    check(run.socketMode === mode,
          `${where}: sortd's Unix socket has mode ${mode.toString(8)} (got ${run.socketMode?.toString(8)})`);
  }
  if (flags.shared_memory !== undefined && flags.shared_memory !== "none") {
    check(/^sortd_shm_regions\{kind="system"\} 0/m.test(run.scrape), `${where}: sortd exports sortd_shm_regions`);
  }
  check(run.code === 0 && run.log.includes("drained, exiting"),
        `${where}: sortd with the rendered flags serves and drains (exit ${run.code})\n${run.log}`);
}

// The dask example (docs/distributed.md): the workers' target names the
// replicas' headless Service in their namespace on its grpc port, their
// scheduler address names the scheduler's Service, which selects the
// scheduler's pods, and the workers spill to a volume of their own.
function checkDask(dir) {
  const where = dir.replace(/^deploy\/k8s\//, "");
  const objects = render(dir);
  const worker = only(objects, "Deployment", "dask-worker");
  const scheduler = only(objects, "Deployment", "dask-scheduler");
  const schedulerService = only(objects, "Service", "dask-scheduler");
  const headless = only(objects, "Service", "sortd-headless");
  const ns = headless.metadata.namespace;
  check(ns && worker.metadata.namespace === ns && scheduler.metadata.namespace === ns,
        `${where}: the workers, the scheduler and the replicas share one namespace (${ns})`);
  check(headless.spec.clusterIP === "None", `${where}: sortd-headless is headless (one address a replica)`);
  const grpcPort = headless.spec.ports.find((p) => p.name === "grpc").port;
  const container = worker.spec.template.spec.containers[0];
  const target = container.env.find((e) => e.name === "SORTD_TARGET")?.value;
  check(target === `dns:///sortd-headless.${ns}.svc.cluster.local:${grpcPort}`,
        `${where}: the workers' SORTD_TARGET names the headless Service (got ${target})`);
  const address = container.args.find((a) => a.startsWith("tcp://"));
  const [host, port] = address.slice("tcp://".length).split(":");
  check(host === schedulerService.metadata.name &&
        schedulerService.spec.ports.some((p) => String(p.port) === port),
        `${where}: the workers' scheduler address ${address} is the scheduler Service's`);
  check(matches(schedulerService.spec.selector, scheduler.spec.template.metadata.labels) &&
        !matches(schedulerService.spec.selector, worker.spec.template.metadata.labels),
        `${where}: the scheduler Service selects the scheduler's pods alone`);
  const local = container.args[container.args.indexOf("--local-directory") + 1];
  const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === local);
  const volume = worker.spec.template.spec.volumes.find((v) => v.name === mount?.name);
  check(volume?.emptyDir?.sizeLimit !== undefined,
        `${where}: the workers spill to an emptyDir (--local-directory ${local}) with a sizeLimit`);
  const sortd = only(objects, "Deployment", "sortd").spec.template.spec.containers
    .find((c) => c.name === "sortd");
  check(sortd.args.some((a) => a.startsWith("--advertise_address=")),
        `${where}: the replicas advertise their own address (sessions behind a headless name)`);
}

for (const kustomization of [
  { dir: "deploy/k8s/overlays/gpu", gpu: true, autoscaled: true },
  { dir: "deploy/k8s/overlays/cpu", gpu: false, autoscaled: true },
  // sortd beside an application in one pod, over shared memory.
  { dir: "deploy/k8s/examples/shm-sidecar", gpu: true, autoscaled: false },
  // dask workers beside the replicas.
  { dir: "deploy/k8s/examples/dask", gpu: true, autoscaled: true },
]) {
  await checkKustomization(kustomization);
}
checkDask("deploy/k8s/examples/dask");
console.log(`${checks - failures} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
