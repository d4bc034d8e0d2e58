# rails_test.rb: issue 23 on a real Rails app. Debian's Redmine (examples/redmine) served by
# Apache and Passenger with four worker processes of the Ruby under test, each loading the
# agent, under wrk's load; the real tracer attaches to the workers with --ps as an operator
# would, in the modes that wrap every method of the app. Each test measures, in the same
# server processes, requests/s and latency before the command, during the attach, while
# attached and after detach (examples/redmine/measure.rb), checks what tracer printed, and
# asserts what is at the top of the class.
#
# The app is set up by examples/redmine/setup: Debian's packages (as root; otherwise the test
# fails with the apt-get line setup prints), an instance with its data (once: a minute or
# two), a bundle for this Ruby. One server serves every test of this file, started by the
# first and stopped when the run ends, whatever happened.
require_relative 'helper'
require_relative '../../examples/redmine/measure'

class RailsTest < Minitest::Test
  # What this test holds tracer to, on a loaded 2-core machine where the server's own rate
  # moves by 30% between windows: the failures issue 23 found (a stall of seconds while the
  # wrappers go in, a worker 40x slower while traced or after, no row, a 500), with room for
  # that noise. Issue 23's own goals (the first row within 2 s, 0.9x attached, 0.98x after
  # detach, p99 within 50 ms of before during the attach) are timing goals: make bench's
  # rails rows (test/bench/rails.rb, and rails_twin.rb for a worker's CPU per request against
  # an untraced twin's) measure them, and this test prints the same figures as rails.rb.
  # s from the command to the first row of the app's methods (-f: every worker attached). The
  # first test's session is each worker's first: under this load, every CPU busy, its install
  # takes at most a tenth of a CPU per worker (ext/tracer_agent/pace.h), 5-9 s here.
  IN_PLACE_WITHIN = 20.0
  # With every CPU busy (load 10 and more: other tests, a hog per core), requests/s follow the
  # CPU a request costs, and that cost itself grows with the contention: 235 -> 485 ms per
  # request attached (--top calls, 0.53x the requests/s of before; -f to a file 0.43x), where a
  # quiet machine's bench sees 1.1-1.25x. A worker 40x slower is 0.025x; a stall, no request.
  ATTACHED_RATIO = 0.2   # requests/s while attached, at least this times before's
  AFTER_RATIO = 0.3      # requests/s after detach, at least this times before's (0.69-0.80x seen loaded)
  ATTACHED_CPU = 5.0     # the workers' CPU per request while attached, at most this times before's
  AFTER_CPU = 2.5        # and after detach (1.2-1.6x seen loaded, over 11 to 16 requests a window)
  DURING_P99 = ->(before_ms) { 2 * before_ms + 1000 } # the p99 during the attach, at most this
  # How it is measured (seconds):
  WINDOW = Float(ENV['RAILS_TEST_WINDOW'] || 10) # of load in each of before, attached, after
  LIMIT = 60                                     # the install may take before tracer gives up (--timeout)

  include TracerTest

  APP_DIR = RedmineLoad::APP_DIR
  # The Ruby under test serves, with what it needs from this environment (make test-rubies
  # gives 3.4 its gems through GEM_PATH and RUBYLIB, YJIT through RUBY_YJIT_ENABLE).
  ENV_FOR_APP = { 'RUBY' => RUBY }.freeze

  @server = nil
  class << self
    def server
      return @server if @server
      raise @failed if @failed

      begin
        warn RedmineLoad::Server.setup(ENV_FOR_APP)
      rescue RuntimeError => e
        raise @failed = e
      end
      # serve picks a free port; another run may take it between the check and Apache's bind.
      tries = 0
      begin
        @server = RedmineLoad::Server.new(ENV_FOR_APP, workers: 4)
      rescue RuntimeError
        retry if (tries += 1) < 2
        raise
      end
      @server.warm(max: 60)
      @server
    end

    def stop_server
      @server&.stop
      @server = nil
    end
  end
  Minitest.after_run { RailsTest.stop_server }
  at_exit { RailsTest.stop_server rescue nil } # rubocop:disable Style/RescueModifier

  def setup
    super
    @server = self.class.server
  rescue RuntimeError => e
    # Ruby 3.4 in make test-rubies' sid root: Debian built Redmine's native gems for 3.3 only,
    # and its registry serves no source of some of them (examples/redmine/native-gems says
    # which). No Redmine can start there; anything else that failed is a failure.
    skip RedmineLoad.unable(e) if RedmineLoad.unable(e)
    flunk e.message
  end

  def test_top_calls_on_four_workers
    fig = session('--top', 'calls', '--interval', '0.5', '--json', '--rows', '40', kind: :top)
    last = tables(fig[:out]).last
    app_rows = last ? last['rows'].select { |r| r['file'].start_with?("#{APP_DIR}/") } : []
    problems = []
    problems << 'no row of the app\'s methods in the last table' if app_rows.empty?
    problems << "no app method counted in all four workers (#{app_rows.first(5).map { |r| "#{r['method']}: #{r['count']} in #{r['pids']}" }.join(', ')})" unless
      app_rows.any? { |r| r['pids'] == 4 }
    problems << "a row of a method outside #{APP_DIR}" unless last.nil? || last['rows'].all? { |r| r['file'].start_with?("#{APP_DIR}/") }
    goals(fig, problems, 'tracer --ps ... --top calls')
  end

  def test_top_time_on_four_workers
    fig = session('--top', 'time', '--interval', '0.5', '--json', '--rows', '40', kind: :top)
    last = tables(fig[:out]).last
    app_rows = last ? last['rows'].select { |r| r['file'].start_with?("#{APP_DIR}/") } : []
    problems = []
    problems << 'no row of the app\'s methods in the last table' if app_rows.empty?
    problems << 'no time in the rows' unless app_rows.any? { |r| r['total_ms'].to_f.positive? }
    # A compiled template is one row across the workers: no object address, no per-process
    # numbers of ActionView's in its name (issue 46).
    per_process = tables(fig[:out]).flat_map { |t| t['rows'] }.map { |r| r['method'] }.grep(/0x\h|_erb__+\d+_\d+\z/).uniq
    problems << "rows named per process: #{per_process.first(3).join(', ')}" unless per_process.empty?
    goals(fig, problems, 'tracer --ps ... --top time')
  end

  def test_firehose_to_a_compressed_file
    Dir.mktmpdir('tracer-rails') do |dir|
      file = File.join(dir, 'trace.log.zst')
      fig = session('-f', '--filter', "#{APP_DIR}/", '-o', file, kind: :trace)
      problems = []
      text = File.exist?(file) ? IO.popen(['zstd', '-dc', file], err: File::NULL, &:read) : ''
      calls = text.each_line.grep(/^\s*(\[[^\]]*\] )*[A-Z][\w:]*(#|\.)[^\s(]+.*<[\d.]+>$/)
      problems << "#{file}: no call with its duration in the trace (#{text.bytesize} bytes)" if calls.empty?
      problems << 'no call of a Redmine controller or model in the trace' unless
        calls.any? { |l| l =~ /\b(ApplicationController|User|Issue|Project|Setting)(#|\.)/ }
      problems << "lines of methods no worker has under #{APP_DIR} (wrappers' own?): #{text[/.*__tracer_.*/]}" if text.include?('__tracer_')
      goals(fig, problems, "tracer --ps ... -f --filter #{APP_DIR}/ -o FILE.zst")
    end
  end

  private

  def session(*mode, kind:)
    # No --duration: the client is sent SIGINT after the attached window, and --top prints a
    # table every --interval meanwhile (with --duration, only one, at the end).
    args = ['--ps', @server.regex, *mode, '--timeout', LIMIT]
    RedmineLoad.session(@server, TRACER, args, kind: kind, window: WINDOW, limit: LIMIT, duration: nil)
  end

  def tables(out)
    out.each_line.filter_map do |l|
      JSON.parse(l) if l.start_with?('{') && l.end_with?("\n")
    rescue JSON::ParserError
      nil
    end
  end

  # Issue 23's goals on fig, with problems found in the output: one failure that tells all.
  def goals(fig, problems, what)
    before = fig[:before]
    problems << "tracer exited with #{fig[:status].inspect}" unless fig[:status]&.success?
    @server.workers.each do |w|
      problems << "no 'detached from process #{w}'" unless fig[:err] =~ /detached from process #{w}\b/
    end
    first = fig[:rows] || fig[:all_attached]
    problems << format('in place after %s, not within %.1f s', first ? format('%.1f s', first) : 'never', IN_PLACE_WITHIN) unless
      first && first <= IN_PLACE_WITHIN
    ratio = ->(ph) { fig[ph] && before[:rps].positive? ? fig[ph][:rps] / before[:rps] : 0 }
    problems << format('attached: %.2fx the requests/s of before, under %.2fx', ratio.(:attached), ATTACHED_RATIO) if
      ratio.(:attached) < ATTACHED_RATIO
    problems << format('after detach: %.2fx the requests/s of before, under %.2fx', ratio.(:after), AFTER_RATIO) if
      ratio.(:after) < AFTER_RATIO
    cpu = ->(ph) { fig[ph] && fig[ph][:cpu_ms] && before[:cpu_ms] ? fig[ph][:cpu_ms] / before[:cpu_ms] : Float::INFINITY }
    problems << format('attached: %.2fx the CPU per request of before, over %.1fx', cpu.(:attached), ATTACHED_CPU) if
      cpu.(:attached) > ATTACHED_CPU
    problems << format('after detach: %.2fx the CPU per request of before, over %.1fx', cpu.(:after), AFTER_CPU) if
      cpu.(:after) > AFTER_CPU
    during, base = fig[:during][:p99], before[:p99]
    problems << format('during the attach: p99 %.0f ms, before %.0f ms: over %.0f ms', during || -1, base || -1, DURING_P99.(base || 0)) if
      during.nil? || base.nil? || during > DURING_P99.(base)
    %i[before during attached after].each do |ph|
      next unless fig[ph]

      bad = fig[ph][:not200] + fig[ph][:errors]
      problems << "#{ph}: #{bad} requests not answered 200 (#{fig[ph][:text][/^not 200: .*/]})" if bad.positive?
    end
    served = @server.kind == 'puma' ? "Puma (#{@server.log[/Passenger could not start here \((.*)\)/, 1]})" : 'Apache and Passenger'
    report = "#{what} on Ruby #{RUBY_VERSION}, served by #{served}, workers #{@server.workers.join(' ')}:\n#{RedmineLoad.table(fig)}"
    report += "\neach worker's TracerAgent.stats after:\n#{(fig[:stats] || {}).map { |w, s| "  #{w}: #{s}" }.join("\n")}"
    puts report if problems.empty? # (a failure says it all)
    assert problems.empty?, "#{problems.join("\n")}\n#{report}\n--- tracer's stderr (the end) ---\n#{fig[:err][-3000..] || fig[:err]}"
  end
end
