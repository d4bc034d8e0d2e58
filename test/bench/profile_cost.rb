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
# Knobs: PROFILE_COST_SECONDS (perf's window per row, 20).
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

  # [own samples, all samples] of a perf result, for the profiler whose code is in dso.
  def self.own(samples, dso)
    total = samples.values.sum
    mine = samples.sum do |(comm, d, sym), n|
      own = OWN_THREADS.include?(comm) || d == dso || (d.start_with?('libruby') && sym =~ VM_PROFILE) ||
            (d == '[kernel.kallsyms]' && sym =~ KERNEL_SIGNAL)
      own ? n : 0
    end
    [mine, total]
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
    ROWS.each do |label, how|
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
      $stdout.flush
    end
  ensure
    server&.stop
  end
end

ProfileCost.run if $PROGRAM_NAME == __FILE__
