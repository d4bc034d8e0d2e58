# frozen_string_literal: true
#
# profile_cost.rb: what the sampling profiler costs a Redmine worker under load, counted where
# the CPU goes rather than timed. A window of wrk's load moves a worker's CPU per request by 15%
# or more on a shared 2-CPU machine, far more than the 1% in question; perf's samples of the
# worker (cpu-clock, 1999 Hz, every thread) say which code each CPU tick ran, and the
# profiler's own code is known: its threads (tracer-sampler, tracer-io, tracer-listener),
# tracer_agent.so wherever it runs, the VM's functions only a profiler calls
# (rb_profile_frames, rb_profile_frame_*, rb_profile_thread_frames), and the kernel's signal
# delivery and CPU timers. stackprof, started in the same worker at the same rates, is counted
# alike (stackprof.so, the same VM functions, the same kernel paths). What this does not count:
# what the profiler's memory traffic costs the app's own code in caches, which only a timed twin
# sees (test/bench/rails_twin.rb's --profile rows).
#
#   ruby -Ilib test/bench/profile_cost.rb        (root: perf reads another user's worker)
#
# Knobs: PROFILE_COST_SECONDS (perf's window per row, 20); PROFILE_COST_ROWS (a pattern: the rows
# whose label matches it); PROFILE_COST_DETAIL=N (under each row, its N largest own entries: thread,
# library, function); PROFILE_COST_ROUNDS=N (the rows N times over, alternating, then each row's
# median share and the samples it pooled: one 20 s window holds some 100 of the profiler's
# samples, so a row's share moves by a tenth from one window to the next).
require 'json'
require 'open3'
require 'rbconfig'
require 'tmpdir'
require_relative '../../examples/redmine/measure'

module ProfileCost
  ROOT = File.expand_path('../..', __dir__)
  TRACER = File.join(ROOT, 'client', 'tracer')
  RUBY = ENV['RUBY'] || RbConfig.ruby
  SECONDS = Float(ENV['PROFILE_COST_SECONDS'] || 20)
  OWN_THREADS = %w[tracer-sampler tracer-io tracer-listener].freeze
  VM_PROFILE = /\A(rb_profile_frames|rb_profile_frame_\w+|rb_profile_thread_frames|thread_profile_frames)\z/
  KERNEL_SIGNAL = /signal|sigreturn|rt_frame|posix_timer|cpu_timer|send_sig|sigqueue|do_timer_settime|itimer/
  ROWS = [
    ['untraced', nil],
    ['--profile (cpu, 100 Hz)', %w[--profile --hz 100]],
    ['--profile (cpu, 1 kHz)', %w[--profile --hz 1000]],
    ['--profile wall (100 Hz)', %w[--profile wall --hz 100]],
    ['stackprof (cpu, 100 Hz)', 10_000],
    ['stackprof (cpu, 1 kHz)', 1000],
  ].freeze

  def self.log(msg) = warn("[profile-cost] #{msg}")

  def self.eval_in(pid, code)
    out, st = Open3.capture2e(TRACER, '-p', pid.to_s, '-e', code, '--timeout', '30')
    raise "worker #{pid}: #{code}: #{out}" unless st.success?

    out
  end

  # perf's samples of pid over SECONDS: { [thread, dso, symbol] => samples }.
  def self.perf(pid)
    Dir.mktmpdir('tracer-perf') do |dir|
      data = File.join(dir, 'perf.data')
      _, err, st = Open3.capture3('perf', 'record', '-e', 'cpu-clock', '-F', '1999', '-p', pid.to_s, '-o', data,
                                  '--', 'sleep', SECONDS.to_s)
      raise "perf record: exit #{st.exitstatus}, #{err.empty? ? 'nothing said' : err}; worker #{pid} " \
            "#{File.exist?("/proc/#{pid}") ? 'alive' : 'gone'}" unless st.success?

      out, err, st = Open3.capture3('perf', 'report', '-i', data, '--stdio', '--sort', 'comm,dso,sym', '-F',
                                    'sample,comm,dso,sym', '--no-children')
      raise "perf report: #{err}" unless st.success?

      out.lines.filter_map do |l|
        m = l.match(/\A\s*(\d+)\s+(.+?)\s{2,}(\S+)\s+\[[.k]\]\s+(.*?)\s*\z/) or next
        [[m[2], m[3], m[4]], Integer(m[1])]
      end.to_h
    end
  end

  def self.own?(comm, dso, d, sym)
    OWN_THREADS.include?(comm) || d == dso || (d.start_with?('libruby') && sym =~ VM_PROFILE) ||
      (d == '[kernel.kallsyms]' && sym =~ KERNEL_SIGNAL)
  end

  # [own samples, all samples] of a perf result, for the profiler whose code is in dso.
  def self.own(samples, dso)
    total = samples.values.sum
    mine = samples.sum { |(comm, d, sym), n| own?(comm, dso, d, sym) ? n : 0 }
    [mine, total]
  end

  def self.detail(samples, dso, n)
    samples.select { |(comm, d, sym), _| own?(comm, dso, d, sym) }.max_by(n) { |_, v| v }.each do |(comm, d, sym), v|
      puts format('    %7d  %-16s %-20s %s', v, comm, d, sym)
    end
  end

  def self.run
    env = { 'RUBY' => RUBY }
    begin
      RedmineLoad::Server.setup(env)
    rescue RuntimeError => e
      raise unless (why = RedmineLoad.unable(e))

      puts "profile-cost: no rows: #{why}"
      return
    end
    server = RedmineLoad::Server.new(env, workers: 1)
    worker = server.workers.first
    log "serving on #{server.port}, worker #{worker}; warming up"
    server.warm
    paths = Gem::Specification.find_by_name('stackprof').full_require_paths rescue nil # rubocop:disable Style/RescueModifier
    version = `#{RUBY} -e 'print RUBY_DESCRIPTION'`
    puts "profile-cost: Redmine, 1 worker of #{version}, under wrk (examples/redmine/load's pages); perf's cpu-clock " \
         "samples of the worker over #{SECONDS.round} s per row: the share of them in the profiler's own code"
    puts format('%-26s %9s %12s %10s', 'row', 'samples', 'profiler\'s', 'share')
    cookie = RedmineLoad.login(server.port)
    rows = ENV['PROFILE_COST_ROWS'] ? ROWS.select { |label, _| label.match?(Regexp.new(ENV['PROFILE_COST_ROWS'])) } : ROWS
    rounds = Integer(ENV['PROFILE_COST_ROUNDS'] || 1)
    shares = Hash.new { |h, k| h[k] = [] }
    (rows * rounds).each do |label, how|
      if how.is_a?(Integer) && paths.nil?
        puts format('%-26s %s', label, 'no stackprof in this Ruby (script/deps bench installs Debian\'s)')
        next
      end
      wrk = RedmineLoad::Wrk.new(server.port, seconds: (SECONDS + 15).ceil, cookie: cookie, connections: 4)
      client = nil
      case how
      when Array
        client = RedmineLoad::Client.new(TRACER, ['-p', worker.to_s, *how, '--interval', '1', '--json', '--rows', '1'])
      when Integer
        eval_in(worker, "$LOAD_PATH.unshift(*#{paths.inspect}); require 'stackprof'; " \
                        "StackProf.start(mode: :cpu, interval: #{how}, raw: false); :started")
      end
      sleep 3 # the session in place and sampling; its first second is not what it costs
      samples = perf(worker)
      mine, total = own(samples, how.is_a?(Integer) ? 'stackprof.so' : 'tracer_agent.so')
      if client
        client.signal('INT')
        client.finish(60)
      elsif how
        eval_in(worker, 'StackProf.stop; StackProf.results; :stopped')
      end
      wrk.stop
      wrk.result(within: 60)
      puts format('%-26s %9d %12d %9.2f%%', label, total, mine, 100.0 * mine / total)
      shares[label] << [mine, total]
      detail(samples, how.is_a?(Integer) ? 'stackprof.so' : 'tracer_agent.so', Integer(ENV['PROFILE_COST_DETAIL'])) if ENV['PROFILE_COST_DETAIL']
      $stdout.flush
    end
    if rounds > 1
      puts "medians of #{rounds} rounds"
      shares.each do |label, runs|
        med = runs.map { |m, t| 100.0 * m / t }.sort[runs.size / 2]
        puts format('%-26s %9d %12d %9.2f%%  (%s)', label, runs.sum(&:last), runs.sum(&:first), med,
                    runs.map { |m, t| format('%.2f', 100.0 * m / t) }.join(' '))
      end
    end
  ensure
    server&.stop
  end
end

ProfileCost.run if $PROGRAM_NAME == __FILE__
