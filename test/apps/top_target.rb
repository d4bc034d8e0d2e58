# frozen_string_literal: true

# top_target.rb MODE[@TAG]: a Ruby process for the --top tests (run with -rtracer_agent, cwd = repo
# root). It prints "ready PID", waits until the file named by ENV['GO'] exists, runs one burst of
# work whose counts are known exactly, prints "done" and sleeps until killed. TAG only makes the
# command line unique, for --ps. Lines marked "# MARK" are found by the tests by their marks.
$stdout.sync = STDOUT.sync = true # both: in a Ruby::Box (4.0) Kernel#puts writes to STDOUT, not $stdout

class Widget
end

def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)

class Burst
  attr_reader :inner_spent

  def initialize = @inner_spent = 0.0

  def tick = nil # TICK

  def outer
    sleep 0.1 # OUTER_SLEEP
    t = clock
    inner
    @inner_spent += clock - t
  end

  def inner
    sleep 0.2 # INNER_SLEEP
  end

  def failing
    sleep 0.1 # FAILING_SLEEP
    raise KeyError, 'failing'
  end
end

N = Integer(ENV['N'] || 1000)

def calls
  b = Burst.new
  10_000.times { b.tick }
end

# Exactly one object per statement and iteration: with frozen string literals, 'x' allocates
# nothing and String.new allocates one String; Array.new(2) one Array, Hash.new one Hash. But
# the first run of each call site also makes its caches (and String.new a hidden shared root):
# a warm-up run before "ready" keeps those out of the counts.
def allocations(n = N)
  n.times do
    Widget.new # WIDGET
    Array.new(2) # ARRAY
    Hash.new # HASH
    String.new('x') # STRING
  end
end

# The seconds each method really took (a busy machine oversleeps), printed for the tests.
def time
  b = Burst.new
  outer = failing = 0.0
  3.times do
    t = clock
    b.outer
    outer += clock - t
  end
  2.times do
    t = clock
    begin
      b.failing
    rescue KeyError
      nil
    end
    failing += clock - t
  end
  puts format('spent inner=%.6f outer=%.6f failing=%.6f', b.inner_spent, outer, failing)
end

# What a gem raises on the app's behalf (JSON's parser, outside the app dir, called from here),
# and what one raises with no frame of the app on its thread's stack (a thread whose block is
# defined in a file outside the app dir, as a server's middleware is).
GEM_FILE = '/nonexistent/gems/static.rb'

def exceptions
  3.times do
    raise KeyError, 'k' # RAISE_KEY
  rescue KeyError
    nil
  end
  2.times do
    raise ArgumentError, 'a' # RAISE_ARGUMENT
  rescue ArgumentError
    nil
  end
  4.times do
    JSON.parse('{') # GEM_RAISE
  rescue JSON::ParserError
    nil
  end
  eval("Thread.new { 5.times { begin; raise IOError, 'gem'; rescue IOError; end } }.join", TOPLEVEL_BINDING, GEM_FILE, 1) # rubocop:disable Security/Eval
end

# Two named threads that both want the GVL: each takes turns, and waits while the other runs.
# A third names itself only after a table has counted its first turn, and turns once more.
def threads
  workers = 2.times.map do |i|
    Thread.new do
      Thread.current.name = "worker-#{i}"
      x = 0
      t = clock
      x += 1 while clock - t < 0.3
      sleep 0.05
    end
  end
  late = Thread.new do
    sleep 0.6
    Thread.current.name = 'late'
    sleep 0.05
  end
  [*workers, late].each(&:join)
end

# A method whose name holds a double quote, a backslash and a line feed: names come from the
# targets, and --metrics must keep them inside their label.
HOSTILE = "evil\"quote\\back\nline"
Burst.define_method(HOSTILE) { nil } # HOSTILE

def hostile
  b = Burst.new
  3.times { b.public_send(HOSTILE) }
end

# attr_readers, whose wrappers read the variable themselves (ext/tracer_agent/wrap.c): a
# thousand calls of each as they are, then a thousand once the app has redefined a, removed b
# and undefined c, which must do what Ruby does then. Any other answer prints MISMATCH.
class Reader
  attr_reader :a, :b, :c, :unset # READER
  alias_method :aa, :a

  def initialize = (@a, @b, @c = 1, 2, 3)
end

def gone?(r, name)
  r.public_send(name)
  false
rescue NoMethodError
  true
end

def readers
  r = Reader.new
  1000.times { puts "MISMATCH #{[r.a, r.b, r.c, r.unset, r.aa].inspect}" unless [r.a, r.b, r.c, r.unset, r.aa] == [1, 2, 3, nil, 1] }
  Reader.class_eval { def a = @a * 10 } # REDEFINED
  Reader.send(:remove_method, :b)
  Reader.send(:undef_method, :c)
  1000.times do
    got = [r.a, gone?(r, :b), gone?(r, :c), r.unset, r.aa]
    puts "MISMATCH after #{got.inspect}" unless got == [10, true, true, nil, 1]
  end
end

# A template compiled as ActionView 6.1 compiles one (Template#compile, #method_name): into an
# anonymous subclass of the view class (Base.with_empty_template_cache), as a method named after
# its path, the path's String#hash (seeded per process) and the template's object id, defined by
# module_eval at the template's path, line 0. Each process names it differently.
class ViewBase
end

TEMPLATE = File.join(__dir__, 'views', 'widgets', 'index.html.erb')

def compile_template
  views = Class.new(ViewBase)
  template = Object.new
  name = +"_#{TEMPLATE.delete_prefix("#{File.dirname(__dir__, 2)}/").tr('^a-z_', '_')}__#{TEMPLATE.hash}_#{template.__id__}"
  name.tr!('-', '_')
  views.module_eval("def #{name}(local_assigns, output_buffer)\n  output_buffer << 'x'\nend\n", TEMPLATE, 0)
  puts "template #{views.inspect}##{name}"
  [views.new, name]
end

VIEW = compile_template if ARGV.fetch(0).start_with?('templates')

def templates
  view, name = VIEW
  7.times { view.public_send(name, {}, +'') }
end

BURSTS = {
  'calls' => method(:calls), 'time' => method(:time), 'exceptions' => method(:exceptions),
  'objects' => method(:allocations), 'objects-total' => method(:allocations),
  'arrays' => method(:allocations), 'strings' => method(:allocations),
  'threads' => method(:threads), 'hostile' => method(:hostile), 'readers' => method(:readers),
  'templates' => method(:templates)
}.freeze

burst = BURSTS.fetch(ARGV.fetch(0).split('@').first) { abort "unknown mode #{ARGV[0]}" }
require 'json' if burst == method(:exceptions)
go = ENV.fetch('GO')
allocations(2) if burst == method(:allocations)
puts "ready #{Process.pid}"
sleep 0.01 until File.exist?(go)
burst.call
puts 'done'
sleep
