# frozen_string_literal: true
#
# bench.rb: what tracing costs a live Ruby process, and what it still costs after the client
# has detached. `make bench` runs it (ruby -Ilib test/bench/bench.rb); progress goes to stderr,
# one table to stdout.
#
# Every figure comes from test/bench/workloads.rb: a target process that loops forever in
# rounds of about ROUND seconds and prints its rate (iterations per second) after each round.
# Rounds are read from the SAME process before the client attaches, while it is attached and
# after it detached, so machine noise cancels in the ratios. The first round after each
# transition (start, attach, detach, SIGCONT) is thrown away. Each attached setting gets a
# fresh process, because attaching leaves traces behind (instrumented instructions, see
# /work/shared/research/ruby-internals.md §2.3): that is what the after-detach column shows.
#
# Knobs (environment): BENCH_ROUNDS (rounds kept per phase, 5), BENCH_CALLS_REPS (repetitions
# of the noisy calls workload, 3), BENCH_BUDGET (seconds; rows that would start later are
# skipped, 250), TRACER_BENCH_TOP=1/0 (force the --top rows on or off; by default they run when
# `tracer --help` lists --top), BENCH_ONLY=keyloop,calls (run only these workloads).
require 'etc'
require 'fileutils'
require 'json'
require 'open3'
require 'rbconfig'
require 'timeout'
require 'tmpdir'

module Bench
  ROOT = File.expand_path('../..', __dir__)
  WORKLOADS = File.join(__dir__, 'workloads.rb')
  RUBY = ENV['RUBY'] || RbConfig.ruby
  ROUND = Float(ENV['BENCH_ROUND_SECONDS'] || 0.2) # must match workloads.rb
  ROUNDS = Integer(ENV['BENCH_ROUNDS'] || 5)      # rounds kept per phase
  BLOCKS = 3                                      # not loaded / loaded interleaving
  BLOCK_ROUNDS = 2                                # rounds kept per process per block
  CALLS_REPS = Integer(ENV['BENCH_CALLS_REPS'] || 3)
  BUDGET = Float(ENV['BENCH_BUDGET'] || 250)      # the table must be done by then
  READY_TIMEOUT = 30
  ATTACH_TIMEOUT = 15
  RBTRACE_TIMEOUT = 20
  DETACH_TIMEOUT = 20
  PHASE_HARD_TIMEOUT = 25
  TOP_INTERVAL = 0.5

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  T0 = now

  def self.log(msg)
    warn format('[%6.1fs] %s', now - T0, msg)
  end

  # Every child we start, so that nothing outlives the bench (see Bench.cleanup).
  CHILDREN = []
  CHILDREN_LOCK = Mutex.new

  def self.register(child) = CHILDREN_LOCK.synchronize { CHILDREN << child }

  def self.cleanup
    CHILDREN_LOCK.synchronize { CHILDREN.dup }.each(&:kill)
  end

  # Waits up to timeout seconds for the block to return a true value; returns that value or nil.
  def self.wait_until(timeout, step: 0.02)
    deadline = now + timeout
    loop do
      v = yield
      return v if v
      return nil if now > deadline

      sleep step
    end
  end

  # A child process whose stdout and stderr are read by threads as they come.
  class Child
    attr_reader :pid

    def initialize(argv, env: {})
      out_r, out_w = IO.pipe
      err_r, err_w = IO.pipe
      @lock = Mutex.new
      @err = +''
      @pid = Process.spawn(env, *argv, in: File::NULL, out: out_w, err: err_w, chdir: ROOT)
      out_w.close
      err_w.close
      @waiter = Process.detach(@pid)
      Bench.register(self)
      @readers = [reader(out_r) { |l| on_out(l) }, reader(err_r) { |l| on_err(l) }]
    end

    def alive? = @waiter.alive?
    def status = @waiter.value

    def err = @lock.synchronize { @err.dup }

    def err_tail(n = 300)
      e = err.strip
      e.size > n ? "...#{e[-n..]}" : e
    end

    def signal(sig)
      Process.kill(sig, @pid)
    rescue Errno::ESRCH
      nil
    end

    # Returns true if the process exited within timeout (its readers are then drained).
    def wait_exit(timeout)
      return false unless @waiter.join(timeout)

      @readers.each { |t| t.join(2) }
      true
    end

    # SIGTERM first, so that at_exit handlers run (rbtrace removes its SysV queues there), then
    # SIGKILL after grace seconds.
    def kill(grace: 0)
      if alive?
        signal('CONT')
        if grace.positive?
          signal('TERM')
          @waiter.join(grace)
        end
        signal('KILL')
      end
      @waiter.join(5)
      @readers.each { |t| t.join(1) || t.kill }
    end

    private

    def reader(io)
      Thread.new do
        io.each_line { |l| yield l }
      rescue IOError, SystemCallError
        nil
      ensure
        io.close unless io.closed?
      end
    end

    def on_out(_line) = nil

    def on_err(line)
      @lock.synchronize { @err << line if @err.size < 100_000 }
    end
  end

  # A workload process (workloads.rb NAME) with the agent (:agent), rbtrace (:rbtrace) or
  # nothing (:none) loaded.
  class Target < Child
    attr_reader :chunk

    def initialize(workload, kind, chunk: nil)
      @workload = workload
      @rounds = []
      @ready = false
      argv = [RUBY]
      case kind
      when :agent then argv += ["-I#{Bench.lib}", '-rtracer_agent']
      when :rbtrace then argv << '-rrbtrace'
      end
      argv += [WORKLOADS, workload]
      argv << chunk.to_s if chunk
      super(argv)
    end

    def wait_ready
      Bench.wait_until(READY_TIMEOUT) { @ready || !alive? }
      return if @ready

      raise "#{@workload} target did not start in #{READY_TIMEOUT}s: #{err_tail}"
    end

    # Rates of the rounds whose report arrived after time t (Bench.now).
    def rates_since(t)
      @lock.synchronize { @rounds.select { |ts, _| ts > t }.map(&:last) }
    end

    # SIGSTOP, then wait until it is stopped and its last report has been read.
    def stop
      signal('STOP')
      Bench.wait_until(2, step: 0.005) { stopped? }
      sleep 0.05
    end

    def cont = signal('CONT')

    def kill(grace: 3) = super

    private

    def stopped?
      File.read("/proc/#{@pid}/stat")[/\) (\S)/, 1] == 'T'
    rescue SystemCallError
      true
    end

    def on_out(line)
      case line
      when /\Aready \d+ (\d+)/
        @chunk = Integer(Regexp.last_match(1))
        @ready = true
      when /\Arate \d+ ([\d.]+)/
        v = Float(Regexp.last_match(1))
        @lock.synchronize { @rounds << [Bench.now, v] }
      end
    end
  end

  # A client (ours or rbtrace); stdout lines are kept for --top --json.
  class Client < Child
    def out_lines = @lock.synchronize { @out.dup }

    def initialize(argv)
      @out = []
      super
    end

    private

    def on_out(line)
      @lock.synchronize { @out << line if @out.size < 100_000 }
    end
  end

  module_function

  def lib = @lib
  def tracer = @tracer

  # Copies the agent and the client to a private directory: other people rebuild them while
  # the bench runs, and copying a new .so over a loaded one crashes its processes (SIGBUS).
  def snapshot
    @tmp = Dir.mktmpdir('tracer-bench-')
    so = File.join(ROOT, 'lib', 'tracer_agent', 'tracer_agent.so')
    client = File.join(ROOT, 'client', 'tracer')
    [so, client].each { |f| File.exist?(f) or abort "bench: #{f} is missing: run make first" }
    FileUtils.cp_r(File.join(ROOT, 'lib'), @tmp)
    @lib = File.join(@tmp, 'lib')
    @tracer = File.join(@tmp, 'tracer')
    FileUtils.cp(client, @tracer)
  end

  def tmp = @tmp

  def remove_snapshot
    FileUtils.rm_rf(@tmp) if @tmp
  end

  def elapsed = now - T0

  # ---------------------------------------------------------------- measuring

  # Rates of the next rounds of t: the first `discard` are dropped, then up to `keep` are
  # kept; with slow rounds it settles for 2 after a while, and for 1 at the hard timeout.
  def phase(t, keep: ROUNDS, discard: 1)
    since = now
    soft = since + ((keep + discard) * ROUND * 2.5) + 1
    hard = since + PHASE_HARD_TIMEOUT
    loop do
      vals = t.rates_since(since).drop(discard)
      return vals if vals.size >= keep
      return vals if vals.size >= 2 && now > soft
      raise "target exited (#{t.status.inspect}): #{t.err_tail}" unless t.alive?
      if now > hard
        return vals unless vals.empty?

        raise "no round completed in #{PHASE_HARD_TIMEOUT}s"
      end
      sleep 0.02
    end
  end

  def median(vals)
    return nil if vals.nil? || vals.empty?

    s = vals.sort
    n = s.size
    n.odd? ? s[n / 2] : (s[(n / 2) - 1] + s[n / 2]) / 2.0
  end

  # Calls (completed, with their duration) in a trace file written by tracer -o or rbtrace -o.
  def count_calls(file)
    return 0 unless File.exist?(file)

    out = nil
    Timeout.timeout(120) { out, = Open3.capture2({ 'LC_ALL' => 'C' }, 'grep', '-c', '<[0-9.]*>$', file) }
    Integer(out.strip)
  rescue Timeout::Error
    raise "counting the lines of #{File.size(file)} bytes of trace timed out"
  end

  def lost_from_stderr(err)
    err.scan(/\*\*\* (?:\S+ )?(\d+) events lost/).sum { |(n)| Integer(n) }
  end

  # --top --json lines: "events" and "lost" are summed when they are per-interval deltas, and
  # the last line's taken when they are running totals (non-decreasing with a growing "elapsed").
  def top_totals(lines)
    objs = lines.filter_map do |l|
      o = JSON.parse(l)
      o if o.is_a?(Hash) && o.key?('events')
    rescue JSON::ParserError
      nil
    end
    return [nil, nil, 'no JSON line with "events"'] if objs.empty?

    ev = objs.map { |o| o['events'].to_i }
    lost = objs.map { |o| o['lost'].to_i }
    el = objs.map { |o| o['elapsed'].to_f }
    cumulative = objs.size > 1 && ev.each_cons(2).all? { |a, b| b >= a } &&
                 el.each_cons(2).all? { |a, b| b >= a } && el.last > TOP_INTERVAL * 1.5
    if cumulative
      [ev.last, lost.last, nil]
    else
      [ev.sum, lost.sum, nil]
    end
  end

  # ---------------------------------------------------------------- rows

  Row = Struct.new(:workload, :setting, :rate, :slow, :after, :events, :lost, :error, :spread,
                   :after_spread, :noisy, :after_noisy, keyword_init: true)

  NOISY = 1.3 # max/min of a phase's rounds above which its ratio is flagged

  def noisy?(*phases) = phases.compact.any? { |v| v.size > 1 && v.max > v.min * NOISY }

  def spread_s(v) = v.empty? ? '-' : format('%.3g..%.3g', v.min, v.max)

  Setting = Struct.new(:name, :kind, :args, :after, keyword_init: true)

  # "not loaded" and "loaded, not attached": two processes, run in turns (SIGSTOP/SIGCONT).
  def baseline(workload, chunk)
    a = b = nil
    a = Target.new(workload, :none, chunk: chunk)
    a.wait_ready
    a.stop
    b = Target.new(workload, :agent, chunk: chunk || a.chunk)
    b.wait_ready
    b.stop
    va = []
    vb = []
    BLOCKS.times do |i|
      pairs = i.even? ? [[a, va], [b, vb]] : [[b, vb], [a, va]]
      pairs.each do |t, v|
        t.cont
        v.concat(phase(t, keep: BLOCK_ROUNDS))
        t.stop
      end
    end
    ma = median(va)
    mb = median(vb)
    log "  #{workload} not loaded #{spread_s(va)}, loaded #{spread_s(vb)}"
    [a.chunk,
     Row.new(workload: workload, setting: 'not loaded', rate: ma, slow: :base),
     Row.new(workload: workload, setting: 'loaded, not attached', rate: mb, slow: ma / mb, noisy: noisy?(va, vb))]
  ensure
    a&.kill
    b&.kill
  end

  def attached(workload, chunk, setting)
    t = c = nil
    out = File.join(tmp, "trace-#{workload}-#{Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)}.txt")
    t = Target.new(workload, setting.kind == :rbtrace ? :rbtrace : :agent, chunk: chunk)
    t.wait_ready
    before = phase(t)
    pid = t.pid.to_s
    argv = case setting.kind
           when :ours then [tracer, '-p', pid, *setting.args, '-o', out]
           when :top then [tracer, '-p', pid, '--top', *setting.args, '--json', '--interval', TOP_INTERVAL.to_s]
           when :rbtrace then ['rbtrace', '-p', pid, *setting.args, '-o', out, '--timeout', RBTRACE_TIMEOUT.to_s]
           end
    c = Client.new(argv)
    limit = setting.kind == :rbtrace ? RBTRACE_TIMEOUT + 5 : ATTACH_TIMEOUT
    attach_t0 = now
    ok = wait_until(limit) do
      c.err.include?('attached to process') || (setting.kind == :top && !c.out_lines.empty?) || !c.alive?
    end
    unless ok && c.alive?
      who = argv.first == 'rbtrace' ? 'rbtrace' : 'client'
      raise "#{who} did not attach in #{limit}s: #{c.err_tail}" if c.alive?

      raise "#{who} exited (#{c.status.exitstatus.inspect}) before attaching: #{c.err_tail}"
    end
    attach_s = now - attach_t0
    during = phase(t)
    if setting.kind == :rbtrace && File.size?(out).to_i.zero?
      raise "rbtrace said it attached (#{attach_s.round(1)}s) but wrote no trace in #{ROUNDS} rounds"
    end
    detach_t0 = now
    c.signal('INT')
    exited = c.wait_exit(DETACH_TIMEOUT)
    detach_s = now - detach_t0
    note = nil
    unless exited
      c.kill
      note = "client ignored SIGINT for #{DETACH_TIMEOUT}s, killed"
    end
    raise "target exited while traced: #{t.err_tail}" unless t.alive?

    after = setting.after ? phase(t) : nil
    count_t0 = now
    events, lost, why = case setting.kind
                        when :top then top_totals(c.out_lines)
                        when :ours then [count_calls(out), lost_from_stderr(c.err)]
                        else [count_calls(out), :unknown]
                        end
    note ||= why
    code = exited ? c.status.exitstatus : nil
    note ||= "client exit #{code}: #{c.err_tail(120)}" if exited && code != 0 && setting.kind != :rbtrace
    mb = median(before)
    log format('  %s %s: before %s, during %s, after %s; attach %.2fs, detach %.2fs, count %.2fs (%d MB); ' \
               '%s events, %s lost',
               workload, setting.name, spread_s(before), spread_s(during), after ? spread_s(after) : '-',
               attach_s, detach_s, now - count_t0, File.size?(out).to_i >> 20, events.inspect, lost.inspect)
    Row.new(workload: workload, setting: setting.name, rate: median(during), slow: mb / median(during),
            after: after && mb / median(after), events: events, lost: lost, error: note,
            noisy: noisy?(before, during), after_noisy: after && noisy?(before, after))
  ensure
    c&.kill
    t&.kill
    File.delete(out) if out && File.exist?(out)
  end

  # ---------------------------------------------------------------- plan

  def top_built?
    case ENV['TRACER_BENCH_TOP']
    when '1' then return true
    when '0' then return false
    end
    out, = Open3.capture2e(tracer, '--help')
    out.include?('--top')
  rescue SystemCallError
    false
  end

  def rbtrace_problem
    return 'rbtrace is not installed' unless system('sh', '-c', 'command -v rbtrace', out: File::NULL)
    return "require 'rbtrace' fails" unless system(RUBY, '-e', 'require "rbtrace"', out: File::NULL, err: File::NULL)

    nil
  end

  HOT = { 'keyloop' => 'Hash#key?', 'alloc' => 'Widget#initialize', 'calls' => 'Object#f',
          'idle' => 'Kernel#sleep' }.freeze

  def settings_for(workload)
    s = []
    s << Setting.new(name: "-m #{HOT[workload]}", kind: :ours, args: ['-m', HOT[workload]], after: true)
    if %w[keyloop calls].include?(workload)
      s << Setting.new(name: '-m Object#never_called', kind: :ours, args: ['-m', 'Object#never_called'], after: true)
    end
    s << Setting.new(name: '-f', kind: :ours, args: ['-f'], after: true) unless workload == 'alloc'
    s << Setting.new(name: '--top calls', kind: :top, args: ['calls'], after: true)
    s << Setting.new(name: '--top objects', kind: :top, args: ['objects'], after: true) unless workload == 'idle'
    if %w[keyloop calls].include?(workload)
      s << Setting.new(name: "rbtrace -m #{HOT[workload]}", kind: :rbtrace, args: ['-m', HOT[workload]], after: true)
      s << Setting.new(name: 'rbtrace --firehose', kind: :rbtrace, args: ['--firehose'], after: true)
    end
    s
  end

  # All rows of one workload (one repetition).
  def run_workload(workload, top:, rbtrace_problem:)
    rows = []
    log "#{workload}: not loaded / loaded, interleaved"
    chunk = nil
    begin
      raise 'skipped: time budget' if elapsed > BUDGET

      chunk, *base = baseline(workload, nil)
      rows.concat(base)
    rescue StandardError => e
      rows << Row.new(workload: workload, setting: 'not loaded / loaded', error: e.message)
    end
    settings_for(workload).each do |s|
      if s.kind == :top && !top
        rows << Row.new(workload: workload, setting: s.name, error: 'n/a (not built)')
        next
      end
      if s.kind == :rbtrace && rbtrace_problem
        rows << Row.new(workload: workload, setting: s.name, error: "n/a (#{rbtrace_problem})")
        next
      end
      if elapsed > BUDGET
        rows << Row.new(workload: workload, setting: s.name, error: 'skipped: time budget')
        next
      end
      log "#{workload}: #{s.name}"
      begin
        rows << attached(workload, chunk, s)
      rescue StandardError => e
        log "  #{workload} #{s.name} failed: #{e.message}"
        rows << Row.new(workload: workload, setting: s.name, error: e.message)
      end
    end
    rows
  end

  # One row out of the repetitions of the same row: medians of the per-repetition figures.
  def merge(reps)
    ok = reps.reject(&:error)
    return reps.first.dup.tap { |r| r.error = "#{r.error} (all #{reps.size} repetitions)" if reps.size > 1 } if ok.empty?

    pick = ->(k) { v = ok.map(&k).compact.grep(Numeric); v.empty? ? ok.first[k] : median(v) }
    r = Row.new(workload: ok.first.workload, setting: ok.first.setting, rate: pick.(:rate),
                slow: ok.first.slow == :base ? :base : pick.(:slow), after: pick.(:after),
                events: pick.(:events), lost: pick.(:lost),
                noisy: ok.count(&:noisy) * 2 > ok.size, after_noisy: ok.count(&:after_noisy) * 2 > ok.size)
    slows = ok.map(&:slow).grep(Numeric)
    afters = ok.map(&:after).grep(Numeric)
    r.spread = [slows.min, slows.max, slows.size] if slows.size > 1
    r.after_spread = [afters.min, afters.max] if afters.size > 1
    failed = reps.size - ok.size
    r.error = "#{failed} of #{reps.size} repetitions failed: #{reps.find(&:error).error}" if failed.positive?
    r
  end

  # ---------------------------------------------------------------- extras

  def micro_bench
    out = nil
    status = nil
    Timeout.timeout(120) { out, status = Open3.capture2e('make', '-s', '-C', File.join(ROOT, 'client'), 'bench') }
    line = out.lines.find { |l| l =~ /decode \+ format/ }
    return "client decode+format: failed (make -C client bench: exit #{status.exitstatus}): #{out.lines.last(3).join.strip}" unless status.success? && line

    fig = line[/median\s+([\d.]+ ?[kMG]? ?events\/s)/, 1] || line.strip
    "client decode+format (make -C client bench): #{fig}"
  rescue Timeout::Error
    'client decode+format: make -C client bench timed out after 120s'
  end

  def round_trip
    t = Target.new('idle', :agent)
    t.wait_ready
    phase(t, keep: 1)
    cmd = "#{tracer} -p #{t.pid} -e 1"
    if system('sh', '-c', 'command -v hyperfine', out: File::NULL)
      json = File.join(tmp, 'hyperfine.json')
      out = nil
      status = nil
      Timeout.timeout(120) do
        # -N: no shell in between; hyperfine's shell-startup correction is noisier than 2 ms.
        out, status = Open3.capture2e('hyperfine', '-N', '--warmup', '3', '--runs', '20', '--style', 'none',
                                      '--export-json', json, cmd)
      end
      raise "hyperfine failed: #{out.lines.last(3).join.strip}" unless status.success?

      r = JSON.parse(File.read(json))['results'][0]
      format('attach + `-e 1` round trip (hyperfine -N, 20 runs, idle target): median %.1f ms (mean %.1f, min %.1f, max %.1f)',
             r['median'] * 1000, r['mean'] * 1000, r['min'] * 1000, r['max'] * 1000)
    else
      times = Array.new(23) do
        t0 = now
        Timeout.timeout(20) { Open3.capture2e(tracer, '-p', t.pid.to_s, '-e', '1') }
        now - t0
      end.drop(3)
      format('attach + `-e 1` round trip (timed by the bench, 20 runs, idle target): median %.1f ms (min %.1f, max %.1f)',
             median(times) * 1000, times.min * 1000, times.max * 1000)
    end
  rescue StandardError => e
    "attach + `-e 1` round trip: failed: #{e.message}"
  ensure
    t&.kill
  end

  # ---------------------------------------------------------------- output

  def header
    cpu = File.read('/proc/cpuinfo')[/^model name\s*:\s*(.*)$/, 1] rescue '?'
    ruby_v, = Open3.capture2e(RUBY, '-v')
    rev, = Open3.capture2e('git', '-C', ROOT, 'rev-parse', '--short', 'HEAD')
    dirty = `git -C #{ROOT} status --porcelain -- ext lib include client 2>/dev/null`.empty? ? '' : ' (with uncommitted changes)'
    load = File.read('/proc/loadavg').split.first(3).join(' ') rescue '?'
    ["tracer benchmark, started #{Time.now.utc.strftime('%Y-%m-%d %H:%M:%S UTC')}",
     "kernel #{`uname -r`.strip}, CPU #{cpu}, nproc #{Etc.nprocessors}, load average at the start #{load}",
     ruby_v.strip,
     "tracer #{rev.strip}#{dirty}"]
  end

  def fmt_rate(v)
    return '-' unless v.is_a?(Numeric)

    if v >= 1e6 then format('%.2fM', v / 1e6)
    elsif v >= 1e3 then format('%.1fk', v / 1e3)
    else format('%.1f', v)
    end
  end

  def fmt_ratio(v, spread = nil, noisy = false)
    return 'base' if v == :base
    return '-' unless v.is_a?(Numeric)

    s = format('%.2fx', v)
    s += format(' [%.2f-%.2f]', spread[0], spread[1]) if spread
    s += noisy ? '?' : ' '
    s
  end

  def fmt_count(v)
    case v
    when nil then '-'
    when :unknown then 'n/r'
    when Numeric then v.round.to_s.reverse.scan(/\d{1,3}/).join(',').reverse
    else v.to_s
    end
  end

  def table(rows)
    head = ['workload', 'setting', 'rate/s', 'slowdown', 'after detach', 'events', 'lost']
    cells = rows.map do |r|
      if r.rate.nil? && r.error
        [r.workload, r.setting, r.error.gsub(/\s+/, ' ')]
      else
        [r.workload, r.setting, fmt_rate(r.rate), fmt_ratio(r.slow, r.spread, r.noisy),
         fmt_ratio(r.after, r.after_spread, r.after_noisy), fmt_count(r.events), fmt_count(r.lost), r.error && "(#{r.error.gsub(/\s+/, ' ')})"]
      end
    end
    widths = head.each_index.map do |i|
      ([head] + cells).select { |c| i < 2 || c.size > 3 }.map { |c| c[i].to_s.size }.max
    end
    line = lambda do |c|
      parts = c.first(c.size == 3 ? 2 : 7).each_with_index.map do |v, i|
        i >= 2 ? v.to_s.rjust(widths[i]) : v.to_s.ljust(widths[i])
      end
      parts << c[2] if c.size == 3
      parts << c[7] if c[7]
      parts.join('  ').rstrip
    end
    out = [line.(head), '-' * (widths.sum + (2 * (widths.size - 1)))]
    prev = nil
    cells.each do |c|
      out << '' if prev && prev != c[0]
      prev = c[0]
      out << line.(c)
    end
    out
  end

  def main
    trap('TERM') { exit 143 } # SIGINT raises Interrupt: both unwind to the ensure below
    head = header
    snapshot
    top = top_built?
    rbtrace = rbtrace_problem
    only = ENV['BENCH_ONLY']&.split(',')
    log "agent and client copied to #{tmp}; --top rows: #{top ? 'on' : 'off (not built)'}; " \
        "rbtrace: #{rbtrace || 'yes'}"
    want = ->(w) { only.nil? || only.include?(w) }
    results = Hash.new { |h, k| h[k] = [] }
    # calls is noisy: its repetitions are spread between the other workloads.
    plan = %w[keyloop calls alloc calls idle calls].select(&want)
    calls_total = plan.count('calls')
    calls_done = 0
    calls_secs = nil
    plan.each do |w|
      if w == 'calls'
        calls_done += 1
        if calls_done > CALLS_REPS || (calls_done > 1 && calls_secs && elapsed + calls_secs > BUDGET)
          log "calls: repetition #{calls_done} skipped (#{calls_done > CALLS_REPS ? 'BENCH_CALLS_REPS' : 'time budget'})"
          next
        end
        log "calls: repetition #{calls_done} of #{[calls_total, CALLS_REPS].min}"
      end
      t0 = now
      results[w] << run_workload(w, top: top, rbtrace_problem: rbtrace)
      calls_secs = now - t0 if w == 'calls'
    end
    log 'client micro-benchmark'
    micro = micro_bench
    log 'attach round trip'
    rt = round_trip
    rows = []
    %w[keyloop alloc calls idle].each do |w|
      reps = results[w]
      next if reps.empty?

      if reps.size == 1
        rows.concat(reps.first)
      else
        names = reps.flatten.map(&:setting).uniq
        names.each { |n| rows << merge(reps.filter_map { |r| r.find { |x| x.setting == n } }) }
      end
    end
    puts head
    puts
    puts table(rows)
    puts
    calls_n = results['calls'].size
    load_end = File.read('/proc/loadavg').split.first(3).join(' ') rescue '?'
    notes = [
      'rate/s: median over the rounds of the phase (iterations per second; idle: wakeups per second). A round is',
      "  ~#{ROUND}s of work in small fixed chunks; #{ROUNDS} rounds kept per phase; the first round after start,",
      '  attach and detach is dropped (fewer rounds are kept when a tracer makes them very slow).',
      'slowdown: rate before attaching / rate while attached, in the same process (1.00x = no cost);',
      '  after detach: rate before attaching / rate after the client detached, same process.',
      "not loaded vs loaded: two processes (without and with -rtracer_agent) run in turns, #{BLOCKS} turns of",
      "  #{BLOCK_ROUNDS} rounds each (SIGSTOP/SIGCONT), so this one ratio is across processes.",
      "?: the rounds of a phase behind the ratio varied by more than #{((NOISY - 1) * 100).round}% (busy machine): a rough figure.",
      'events: calls completed in the trace file (-m, -f, rbtrace); for --top, the "events" of its --json lines;',
      '  lost: "*** N events lost" from our client; rbtrace reports none (n/r).',
      "agent and client were copied to a temporary directory first (others may rebuild them during the run).",
      "load average at the end: #{load_end}"
    ]
    if calls_n.positive?
      notes.insert(8, "calls: #{calls_n} repetition(s) of every row in fresh processes, spread over the run; the",
                   '  figures are medians of the per-repetition figures, [min-max] of the per-repetition slowdowns.')
    end
    puts notes
    puts
    puts micro
    puts rt
    log format('done in %.0fs', elapsed)
  ensure
    cleanup
    remove_snapshot
  end
end

Bench.main if $PROGRAM_NAME == __FILE__
