# inject.rb [COUNT] [JOBS]: loads the agent COUNT times (default 1000) into fresh bare Ruby
# processes (no agent, no RUBYOPT) that run test/soak/inject_app.rb under `ruby -d` (every
# exception raised, even rescued, is printed): allocating, collecting and compacting, handing a
# Mutex back and forth, forking, requiring in a thread. Each load comes at a random moment of
# the app's run, busy or idle, then a client evaluates in it. Each app must exit 0 with the
# very stdout and stderr of an untraced run: no crash, no deadlock, no exception, no change in
# what it does. JOBS processes at a time (default 2). Prints one line per failure, then a
# summary, with how long the processes were held still (median, 90th percentile, max).
require 'open3'
require 'tmpdir'
require 'timeout'

ROOT = File.expand_path('../..', __dir__)
TRACER = File.join(ROOT, 'client', 'tracer')
APP = File.join(ROOT, 'test', 'soak', 'inject_app.rb')
RUBY = ENV['TRACER_TEST_RUBY'] || RbConfig.ruby
COUNT = Integer(ARGV[0] || 1000)
JOBS = Integer(ARGV[1] || 2)
LIMIT = Float(ENV.fetch('SOAK_LIMIT', '120')) # seconds for one run: beyond, it is a deadlock
# (Under Ruby::Box, RUBYOPT keeps Ruby's warning that it is experimental off the apps' stderr.)
BARE = { 'RUBYOPT' => ENV['RUBY_BOX'] == '1' ? '-W:no-experimental' : nil, 'TRACER_AGENT_INJECT' => nil }.freeze
HELD = /held still ([\d.]+) ms/

# One run of the app: [stdout, stderr, status]; yields its pid once it said ready, and closes
# its stdin (the app's cue to finish) when the block returns. The app leads a process group of
# its own: a run past LIMIT is a deadlock, and then every process of the group (the app and any
# child it forked, which holds its pipes too) has its stacks taken and is killed.
def run_app(dir)
  Open3.popen3(BARE, RUBY, '-d', APP, dir, pgroup: true) do |stdin, stdout, stderr, wait|
    err = Thread.new { stderr.read }
    out = +''
    out << (stdout.gets || '')
    yield wait.pid if block_given? && out == "ready\n"
    stdin.close
    Timeout.timeout(LIMIT) { out << stdout.read }
    [out, err.value.gsub(/#{Regexp.escape(dir)}/, 'DIR'), wait.value]
  rescue Timeout::Error
    seen = group(wait.pid).map { |pid| "process #{pid}#{pid == wait.pid ? ' (the app)' : ''}:\n#{stacks(pid)}" }
    begin
      Process.kill('KILL', -wait.pid)
    rescue Errno::ESRCH # all gone meanwhile
    end
    [out, "deadlock: still running #{LIMIT} s after its cue\n#{seen.join}#{err.value}", wait.value]
  end
end

# The processes of process group pgid.
def group(pgid)
  Dir.glob('/proc/[0-9]*/stat').filter_map do |f|
    fields = File.read(f).sub(/\A.*\) /m, '').split
    Integer(File.basename(File.dirname(f))) if Integer(fields[2]) == pgid
  rescue Errno::ENOENT, Errno::ESRCH
    nil
  end.sort
end

# Every thread's stack in pid, from gdb when there is one (at most 20 frames a thread).
def stacks(pid)
  return "  (no gdb here to show its stacks)\n" unless system('command -v gdb >/dev/null')

  out = IO.popen(['timeout', '30', 'gdb', '-batch', '-p', pid.to_s, '-ex', 'thread apply all bt 20'],
                 err: File::NULL, &:read)
  out.lines.grep(/^(#|Thread )/).map { |l| "  #{l.sub(/ \(.*?\) at /, ' at ')}" }.join
end

def expected
  Dir.mktmpdir('tracer-soak-') do |dir|
    out, err, status = run_app(dir)
    abort "inject soak: the app fails untraced (exit #{status.exitstatus}):\n#{err}" unless status.success?
    [out, err]
  end
end

# One injection: nil when all is well, else what went wrong.
def one(i, want)
  held = nil
  Dir.mktmpdir('tracer-soak-') do |dir|
    traced = nil
    out, err, status = run_app(dir) do |pid|
      sleep rand * 1.2
      # The client may attach while the loader thread's require is still returning (the agent
      # answers from its Init_ on): the count is taken once that thread is done.
      traced = Open3.capture3(TRACER, '-p', pid.to_s, '-e', 'Thread.list.find { |t| t.name == "tracer-inject" }&.join(10); ' \
                                                         '$LOADED_FEATURES.grep(/tracer_agent\.so\z/).size',
                              '--timeout', '60')
    end
    t_out, t_err, t_status = traced || ['', 'the app never said ready', nil]
    held = Float(t_err[HELD, 1]) if t_err.match?(HELD)
    problems = []
    problems << "tracer: exit #{t_status&.exitstatus}: #{t_out}#{t_err}" if t_status.nil? || !t_status.success? || t_out != "=> 1\n"
    problems << "app: #{status}" unless status.success?
    problems << "app output differs:\n--- stdout\n#{out}--- stderr\n#{err}" if [out, err] != want
    return [i, problems.empty? ? nil : problems.join("\n"), held]
  end
end

def percentile(sorted, p) = sorted.empty? ? 0 : sorted[[(sorted.size * p).ceil - 1, 0].max]

want = expected
abort 'inject soak: two untraced runs differ: the app is not deterministic' unless expected == want
queue = Queue.new
COUNT.times { |i| queue << i }
JOBS.times { queue << nil }
results = Queue.new
start = Time.now
workers = JOBS.times.map do
  Thread.new do
    while (i = queue.pop)
      results << one(i, want)
    end
  end
end
workers.each(&:join)
all = Array.new(results.size) { results.pop }
failures = all.select { |_, problem, _| problem }
failures.each { |i, problem, _| puts "inject soak: run #{i}: #{problem}" }
# Ruby 3.4.5 itself can leave a forked child stuck in its after-fork cleanup, on a lock another
# thread held at the fork, with no tracer anywhere (fork_untraced.rb shows it): such runs are
# failures all the same, and named.
atfork = failures.count { |_, problem, _| problem.include?('threadptr_interrupt_exec_cleanup') }
held = all.filter_map { |_, _, h| h }.sort
puts format('inject soak: %d injections, %d loaded, %d failed, Ruby %s%s, in %.0f s',
            COUNT, held.size, failures.size, RUBY_VERSION,
            defined?(RubyVM::YJIT) && ENV['RUBY_YJIT_ENABLE'] == '1' ? ' with YJIT' : '', Time.now - start)
puts "inject soak: #{atfork} of the failures: a forked child stuck in Ruby's after-fork cleanup (see fork_untraced.rb)" if atfork.positive?
puts format('inject soak: held still %.2f ms median, %.2f ms at the 90th percentile, %.2f ms at most',
            percentile(held, 0.5), percentile(held, 0.9), held.last || 0)
exit(failures.empty? ? 0 : 1)
