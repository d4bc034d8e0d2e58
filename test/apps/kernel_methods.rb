# frozen_string_literal: false
# kernel_methods.rb: calls every public method of Kernel, BasicObject, Object, Module and Class
# (and Kernel's private ones that a program calls without a receiver: puts, raise, block_given?,
# binding, caller...) and prints what each returned, one line each, deterministic: a test
# compares a round run untraced with one run while tracer wraps every method of those modules
# (-m 'Kernel#' 'BasicObject#' 'Object#' 'Module#' 'Class#') and one after it detached.
#
# A round runs each time a line comes on stdin; it ends with "END". A public method this Ruby has
# and the table below lacks makes the round say so (MISSING name): the test then fails, so that
# a new Ruby's new methods get exercised too.
$stdout.sync = true
Warning[:deprecated] = false

class Probe
  attr_accessor :v

  def initialize(v = 1) = @v = v
  def inspect = "#<Probe #{@v.inspect}>"
  def ==(other) = other.is_a?(Probe) && other.v == v
  def frame_block_given = block_given?
  def frame_iterator = iterator? # rubocop:disable Lint/DeprecatedClassMethods
  def frame_binding(a = 7) = binding.local_variables.sort.map { |n| [n, binding.local_variable_get(n)] }
  def frame_locals(a = 1, b = 2) = local_variables
  def frame_method = __method__
  alias frame_callee_alias frame_method
  def frame_callee = __callee__
  alias frame_callee2 frame_callee
  def frame_dir = __dir__ == File.dirname(File.expand_path(__FILE__))
  def frame_caller = caller(0, 1).first[/'.*|`.*/]
  def frame_caller_locations = caller_locations(0, 1).first.label
  def frame_eval(x = 5) = eval('x + 1')
  def frame_proc = proc { |a| a * 2 }.call(3)
  def frame_lambda = lambda { |a| a * 3 }.call(3)
  def frame_raise
    raise ArgumentError, 'boom'
  rescue ArgumentError => e
    [e.message, e.backtrace_locations.first.label, e.backtrace_locations.first.lineno == __LINE__ - 2]
  end
  def frame_fail
    fail 'failed'
  rescue RuntimeError => e
    [e.message, e.backtrace_locations.first.label]
  end
  def frame_warn
    old = $stderr
    $stderr = StringIO.new
    warn 'careful', uplevel: 0
    $stderr.string.sub(/\A.*?:\d+: /) { |m| m.end_with?("#{__LINE__ - 1}: ") ? 'HERE: ' : m }
  ensure
    $stderr = old
  end
  def frame_loop = (n = 0; loop { n += 1; break n * 10 if n == 3 })
  def frame_catch = catch(:done) { throw :done, 42 }
  def frame_require_relative
    $LOADED_FEATURES.delete_if { |f| f.end_with?('/kernel_methods_helper.rb') }
    require_relative('kernel_methods_helper')
  end
  def frame_send(x) = send(:frame_private, x)
  def frame_public_send = public_send(:v)
  def frame_tap = 5.tap { |x| @tapped = x * 2 } && @tapped
  def frame_then = 5.then { |x| x + 1 }
  def frame_gsub = ('abc' =~ /b/) && $~[0]
  def frame_format = format('%05.1f|%-3s|', 3.14159, 'x')

  private

  def frame_private(x) = x * 4
end

class Scoped
  def self.visibility_probe
    result = []
    Class.new do
      private

      def hidden = 1
      result << private_method_defined?(:hidden)
      public

      def shown = 2
      result << public_method_defined?(:shown)
      protected

      def guarded = 3
      result << protected_method_defined?(:guarded)
    end
    result
  end
end

module Mixin
  def mixed = :mixed
end

# obj.name(*args), given to the block if one comes; :absent on a Ruby that has no such method
# (its NoMethodError would show an address).
def on(obj, name, *args)
  return :absent unless obj.respond_to?(name)

  v = obj.public_send(name, *args)
  block_given? ? yield(v) : v
end

# Every object here prints without an address: its inspect is its own, or one of Ruby's that
# shows none.
def rounds
  o = Probe.new(3)
  k = Class.new(Probe) { def self.name = 'Anon' }
  m = Module.new { def self.name = 'AnonMod' }
  s = +'str'
  {
    # Kernel, public
    '!~' => -> { 'abc' !~ /z/ },
    '<=>' => -> { o <=> o },
    '===' => -> { Object.new === 1 },
    '=~' => -> { Object.new =~ 1 },
    'class' => -> { o.class },
    'clone' => -> { o.clone.v },
    'define_singleton_method' => -> { x = Object.new; x.define_singleton_method(:hi) { :hi }; x.hi },
    'display' => -> { out = StringIO.new; 42.display(out); out.string },
    'dup' => -> { o.dup.v },
    'enum_for' => -> { [1, 2].enum_for(:each).to_a },
    'eql?' => -> { 1.eql?(1) },
    'extend' => -> { Object.new.extend(Mixin).mixed },
    'freeze' => -> { s.dup.freeze.frozen? },
    'frozen?' => -> { :sym.frozen? },
    'hash' => -> { 'x'.hash == 'x'.hash },
    'inspect' => -> { [nil, 1, 'a'].inspect },
    'instance_of?' => -> { o.instance_of?(Probe) },
    'instance_variable_defined?' => -> { o.instance_variable_defined?(:@v) },
    'instance_variable_get' => -> { o.instance_variable_get(:@v) },
    'instance_variable_set' => -> { Probe.new.instance_variable_set(:@v, 9) },
    'instance_variables' => -> { o.instance_variables },
    'is_a?' => -> { o.is_a?(Object) },
    'itself' => -> { o.itself.equal?(o) },
    'kind_of?' => -> { o.kind_of?(Probe) },
    'method' => -> { o.method(:v).call },
    'methods' => -> { o.methods.include?(:frame_method) },
    'nil?' => -> { nil.nil? },
    'object_id' => -> { o.object_id == o.object_id },
    'private_methods' => -> { o.private_methods.include?(:frame_private) },
    'protected_methods' => -> { o.protected_methods },
    'public_method' => -> { o.public_method(:v).owner },
    'public_methods' => -> { o.public_methods(false).sort.first(3) },
    'public_send' => -> { o.frame_public_send },
    'remove_instance_variable' => -> { x = Probe.new(4); x.remove_instance_variable(:@v) },
    'respond_to?' => -> { [o.respond_to?(:v), o.respond_to?(:frame_private), o.respond_to?(:frame_private, true)] },
    'send' => -> { o.frame_send(2) },
    'singleton_class' => -> { o.singleton_class.inspect.start_with?('#<Class:#<Probe') },
    'singleton_method' => -> { x = Object.new; def x.one = 1; x.singleton_method(:one).call },
    'singleton_methods' => -> { x = Object.new; def x.one = 1; x.singleton_methods },
    'taint' => -> { 1.respond_to?(:taint) },
    'tainted?' => -> { 1.respond_to?(:tainted?) },
    'tap' => -> { o.frame_tap },
    'then' => -> { o.frame_then },
    'to_enum' => -> { [3, 4].to_enum.map { |x| x * 2 } },
    'to_s' => -> { :sym.to_s },
    'trust' => -> { 1.respond_to?(:trust) },
    'untaint' => -> { 1.respond_to?(:untaint) },
    'untrust' => -> { 1.respond_to?(:untrust) },
    'untrusted?' => -> { 1.respond_to?(:untrusted?) },
    'yield_self' => -> { 4.yield_self { |x| x * x } },
    'pretty_inspect' => -> { { a: [1, 2] }.pretty_inspect },
    'pretty_print' => -> { PP.pp(o, +'') },
    'pretty_print_cycle' => -> { q = PP.new(+''); [1].pretty_print_cycle(q); q.flush; q.output },
    'pretty_print_inspect' => -> { begin; Object.new.pretty_print_inspect; rescue RuntimeError => e; e.message; end },
    'pretty_print_instance_variables' => -> { o.pretty_print_instance_variables },
    # BasicObject
    '!' => -> { !o },
    '!=' => -> { o != Probe.new(4) },
    '==' => -> { o == Probe.new(3) },
    '__id__' => -> { o.__id__ == o.object_id },
    '__send__' => -> { o.__send__(:frame_private, 3) },
    'equal?' => -> { o.equal?(o) },
    'instance_eval' => -> { [o.instance_eval { @v }, o.instance_eval('@v + 1')] },
    'instance_exec' => -> { o.instance_exec(2) { |x| @v * x } },
    # Module
    '<' => -> { Probe < Object },
    '<=' => -> { Probe <= Probe },
    '>' => -> { Object > Probe },
    '>=' => -> { Probe >= Probe },
    'alias_method' => -> { c = Class.new { def a = 1 }; c.send(:alias_method, :b, :a); c.new.b },
    'ancestors' => -> { m.ancestors.map(&:name) },
    'attr' => -> { c = Class.new { attr :z }; c.public_method_defined?(:z) },
    'attr_accessor' => -> { c = Class.new { attr_accessor :z }; x = c.new; x.z = 3; x.z },
    'attr_reader' => -> { c = Class.new { attr_reader :z }; c.public_method_defined?(:z) },
    'attr_writer' => -> { c = Class.new { attr_writer :z }; c.public_method_defined?(:z=) },
    'autoload' => -> { c = Module.new; c.autoload(:Later, '/nonexistent/later.rb'); c.autoload?(:Later) },
    'autoload?' => -> { Object.autoload?(:NoSuchThingHere) },
    'class_eval' => -> { [k.class_eval { def ce = :ce } && k.new.ce, k.class_eval('1 + 1')] },
    'class_exec' => -> { k.class_exec(5) { |x| x * 2 } },
    'class_variable_defined?' => -> { k.class_variable_defined?(:@@cv) },
    'class_variable_get' => -> { k.class_variable_set(:@@cv, 7); k.class_variable_get(:@@cv) },
    'class_variable_set' => -> { k.class_variable_set(:@@cw, 8) },
    'class_variables' => -> { k.class_variable_set(:@@cx, 1); k.class_variables.sort },
    'const_defined?' => -> { Object.const_defined?(:Probe) },
    'const_get' => -> { Object.const_get(:Probe) },
    'const_missing' => -> { begin; m.const_missing(:Nope); rescue NameError => e; e.name; end },
    'const_set' => -> { m.const_set(:FIVE, 5); m::FIVE },
    'const_source_location' => -> { Object.const_source_location(:Probe)[1] },
    'constants' => -> { m.const_set(:SIX, 6); m.constants.sort },
    'define_method' => -> { c = Class.new; c.send(:define_method, :dm) { |x = 2| x * 3 }; c.new.dm },
    'deprecate_constant' => -> { c = Module.new; c.const_set(:OLD, 1); c.deprecate_constant(:OLD).equal?(c) },
    'freeze (Module)' => -> { Module.new.freeze.frozen? },
    'include' => -> { c = Class.new; c.include(Mixin); c.new.mixed },
    'include?' => -> { Probe.include?(Kernel) },
    'included_modules' => -> { m.included_modules },
    'inspect (Module)' => -> { Probe.inspect },
    'instance_method' => -> { Probe.instance_method(:frame_format).bind_call(o) },
    'instance_methods' => -> { Mixin.instance_methods },
    'method_defined?' => -> { Probe.method_defined?(:frame_method) },
    'module_eval' => -> { [m.module_eval { def me = :me } , m.module_eval('2 * 2')] },
    'module_exec' => -> { m.module_exec(3) { |x| x + 1 } },
    'name' => -> { Probe.name },
    'prepend' => -> { c = Class.new { def mixed = :own }; c.prepend(Mixin); c.new.mixed },
    'private_class_method' => -> { c = Class.new { def self.pc = 1; private_class_method :pc }; c.respond_to?(:pc) },
    'private_constant' => -> { c = Module.new { const_set(:P, 1); private_constant :P }; c.const_defined?(:P) },
    'private_instance_methods' => -> { Probe.private_instance_methods(false) },
    'private_method_defined?' => -> { Probe.private_method_defined?(:frame_private) },
    'protected_instance_methods' => -> { Probe.protected_instance_methods(false) },
    'protected_method_defined?' => -> { Probe.protected_method_defined?(:v) },
    'public_class_method' => -> { c = Class.new { def self.pc = 1; private_class_method :pc; public_class_method :pc }; c.pc },
    'public_constant' => -> { c = Module.new { const_set(:P, 1); private_constant :P; public_constant :P }; c::P },
    'public_instance_method' => -> { Probe.public_instance_method(:v).name },
    'public_instance_methods' => -> { Mixin.public_instance_methods },
    'public_method_defined?' => -> { Probe.public_method_defined?(:v) },
    'remove_class_variable' => -> { k.class_variable_set(:@@rm, 1); k.remove_class_variable(:@@rm) },
    'remove_method' => -> { c = Class.new { def gone = 1 }; c.send(:remove_method, :gone); c.method_defined?(:gone) },
    'singleton_class?' => -> { Probe.singleton_class.singleton_class? },
    'to_s (Module)' => -> { Probe.to_s },
    'undef_method' => -> { c = Class.new(Probe) { undef_method :v }; c.method_defined?(:v) },
    'refine' => -> { Module.new { refine(String) { def shout = upcase } }.class },
    'refinements' => -> { on(Module.new { refine(String) { nil } }, :refinements, &:size) },
    'set_temporary_name' => -> { on(Module.new, :set_temporary_name, 'fake_name', &:name) },
    'undefined_instance_methods' => -> { on(Class.new(Probe) { undef_method :v }, :undefined_instance_methods) },
    'const_source_location (inherited)' => -> { Probe.const_source_location(:Object).class },
    # Class
    'allocate' => -> { Probe.allocate.v },
    'new' => -> { Probe.new(8).v },
    'subclasses' => -> { Class.new.subclasses },
    'superclass' => -> { Probe.superclass },
    'attached_object' => -> { on(Probe.singleton_class, :attached_object) },
    # Kernel, private: what a program calls without a receiver
    'block_given? (with a block)' => -> { o.frame_block_given { 1 } },
    'block_given? (without)' => -> { o.frame_block_given },
    'iterator?' => -> { o.frame_iterator { 1 } },
    'binding' => -> { o.frame_binding },
    'local_variables' => -> { o.frame_locals },
    '__method__' => -> { [o.frame_method, o.frame_callee_alias] },
    '__callee__' => -> { [o.frame_callee, o.frame_callee2] },
    '__dir__' => -> { o.frame_dir },
    'caller' => -> { o.frame_caller },
    'caller_locations' => -> { o.frame_caller_locations },
    'eval' => -> { o.frame_eval },
    'proc' => -> { o.frame_proc },
    'lambda' => -> { o.frame_lambda },
    'raise' => -> { o.frame_raise },
    'fail' => -> { o.frame_fail },
    'warn' => -> { o.frame_warn },
    'loop' => -> { o.frame_loop },
    'catch' => -> { o.frame_catch },
    'require_relative' => -> { o.frame_require_relative },
    'format' => -> { o.frame_format },
    'sprintf' => -> { sprintf('%x', 255) },
    'Array' => -> { Array(nil) + Array([1]) + Array(1..2) },
    'Complex' => -> { Complex('1+2i') },
    'Float' => -> { Float('1.5') },
    'Hash' => -> { [Hash(nil), Hash([]), Hash({ a: 1 })] },
    'Integer' => -> { [Integer('0x1f', exception: false), Integer('zz', exception: false)] },
    'Rational' => -> { Rational(1, 3) },
    'String' => -> { String(12) },
    'global_variables' => -> { global_variables.include?(:$stdout) },
    'rand/srand' => -> { srand(1); [rand(100), rand(100)] },
    'sleep' => -> { sleep(0) },
    'Regexp match ($~)' => -> { o.frame_gsub },
    'print/puts/p into a StringIO' => lambda {
      out = StringIO.new
      old = $stdout
      $stdout = out
      print 'a'
      puts 'b'
      p :c
      pp({ d: 1 })
      putc 'e'
      printf('%d', 6)
      $stdout = old
      out.string
    },
    'Integer() and friends through send' => -> { [send(:Integer, '7'), __send__(:Float, '2')] },
    'test' => -> { test(?e, __FILE__) },
    'select' => -> { r, w = IO.pipe; w.write('x'); select([r], nil, nil, 0)&.first&.size },
    'open' => -> { open(__FILE__, &:readline).start_with?('# frozen') },
    'system' => -> { system('true') },
    '` (backtick)' => -> { `echo hi` },
    'at_exit' => -> { at_exit { nil }.class },
    'trace_var/untrace_var' => -> { trace_var(:$kernel_probe) { nil }; untrace_var(:$kernel_probe).size },
    'set_trace_func' => -> { set_trace_func(nil) },
    'initialize_copy/clone/dup' => -> { [o.dup.v, o.clone(freeze: true).frozen?] },
    'bind_call on a BasicObject' => -> { b = BasicObject.new; Kernel.instance_method(:instance_variable_set).bind_call(b, :@x, 1); Kernel.instance_method(:instance_variables).bind_call(b) },
    'respond_to_missing?' => -> { o.respond_to?(:nope) },
    'method_missing' => -> { begin; o.nope; rescue NoMethodError => e; [e.name, e.receiver.equal?(o)]; end },
    'visibility in a class body' => -> { Scoped.visibility_probe },
    'module_function' => -> { mm = Module.new { module_function; def mf = 1 }; [mm.mf, mm.private_method_defined?(:mf)] },
    'using' => -> { TOPLEVEL_BINDING.eval("using Module.new { refine(Integer) { def twice = self * 2 } }; 4.twice") },
  }
end

NOT_CALLED = {
  # (each ends the process, replaces it, or waits on something a test does not give)
  'abort' => 'ends the process', 'exit' => 'ends the process', 'exit!' => 'ends the process',
  'exec' => 'replaces the process', 'fork' => 'makes a process the round would wait for',
  'spawn' => 'makes a process the round would wait for', 'syscall' => 'not portable',
  'readline' => 'reads stdin, which drives the rounds', 'readlines' => 'reads stdin, which drives the rounds',
  'trap' => 'changes a signal handler of the process', 'load' => 'needs a file of its own',
  'require' => 'loaded everything already', 'gem' => 'rubygems', 'gem_original_require' => 'rubygems',
  'gets' => 'reads stdin, which drives the rounds',
  'ruby2_keywords' => 'only marks a method', 'throw' => 'exercised with catch',
}.freeze

def check_coverage(table)
  names = table.keys.map { |k| k.split(/[ \/(]/).first }
  public_ones = [Kernel, BasicObject, Object, Module, Class].flat_map { |c| c.public_instance_methods(false) }
  (public_ones.map(&:to_s).uniq - names).sort.each { |n| puts "MISSING #{n}" }
end

def round
  table = rounds
  table.each do |name, f|
    value = begin
      f.call.inspect
    rescue Exception => e # rubocop:disable Lint/RescueException
      "raised #{e.class}: #{e.message}"
    end
    puts "#{name} => #{value}"
  end
  check_coverage(table)
  puts 'END'
end

require 'stringio'
require 'pp'
puts "ready #{Process.pid}"
$stdin.each_line { round }
