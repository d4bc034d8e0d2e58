# gen_corpus.rb: writes the fuzzers' seed corpora (test/fuzz/corpus/TARGET/NAME), a few valid
# messages of every type. Run it again after a protocol change: ruby test/fuzz/gen_corpus.rb
require 'fileutils'

# Just enough msgpack for the protocol, so the script needs no gem.
module Pack
  module_function

  def pack(v)
    case v
    when nil then "\xc0".b
    when true then "\xc3".b
    when false then "\xc2".b
    when Integer then int(v)
    when String then str(v)
    when Array then array(v.size) + v.map { |e| pack(e) }.join.b
    else raise ArgumentError, v.inspect
    end
  end

  def int(v)
    return [v].pack('C') if v >= 0 && v < 128
    return [v & 0xff].pack('C') if v < 0 && v >= -32
    return "\xcc".b + [v].pack('C') if v >= 0 && v < 1 << 8
    return "\xcd".b + [v].pack('n') if v >= 0 && v < 1 << 16
    return "\xce".b + [v].pack('N') if v >= 0 && v < 1 << 32
    return "\xcf".b + [v].pack('Q>') if v >= 0
    "\xd3".b + [v].pack('q>')
  end

  def str(s)
    s = s.b
    head = if s.size < 32 then [0xa0 | s.size].pack('C')
           elsif s.size < 256 then "\xd9".b + [s.size].pack('C')
           elsif s.size < 65_536 then "\xda".b + [s.size].pack('n')
           else "\xdb".b + [s.size].pack('N')
           end
    head + s
  end

  def array(n)
    return [0x90 | n].pack('C') if n < 16
    return "\xdc".b + [n].pack('n') if n < 65_536

    "\xdd".b + [n].pack('N')
  end
end

def msgs(*list) = list.map { |m| Pack.pack(m) }.join.b

DIR = File.join(__dir__, 'corpus')
VERSION = Integer(File.read(File.join(__dir__, '../../include/tracer_protocol.h'))[/#define TRC_PROTOCOL_VERSION (\d+)/, 1])

def write(target, name, bytes)
  FileUtils.mkdir_p(File.join(DIR, target))
  File.binwrite(File.join(DIR, target, name), bytes)
end

# ---- client -> agent (fuzz_agent_command): first byte = read size (0: whole reads) ----
a = 'fuzz_agent_command'
hello = [1, VERSION, 4242]
write(a, 'hello', "\0".b + msgs(hello))
write(a, 'trace_firehose', "\0".b + msgs(hello, [2, 1, 0, [], [true, [], []]]))
write(a, 'trace_specs', "\0".b + msgs(hello, [2, 6, 10, [['Foo::Bar', 0, 'baz', ['self', '@x']],
                                                      ['Foo', 1, nil, []],
                                                      [nil, 2, 'each', ['a.b']]],
                                           [false, ['/app/'], ['^Rack', 'x$']]]))
write(a, 'eval', "\0".b + msgs(hello, [3, 1, 0, '6 * 7'], [4]))
write(a, 'heapdump', "\0".b + msgs(hello, [3, 2, 1, '/tmp/heap.json'], [4]))
write(a, 'backtraces', "\x07".b + msgs(hello, [3, 3, 2, ''], [4]))
write(a, 'backtraces_n', "\0".b + msgs(hello, [3, 3, 2, '5'], [3, 4, 3, '10'], [4]))
# -i: a line checked, run, interrupted; then --fork, --shapesdump (a file comes with it), --memory.
write(a, 'interactive', "\x05".b + msgs(hello, [3, 1, 5, "def f\n"], [3, 2, 5, "def f\n1\nend\n"],
                                         [3, 3, 4, "def f\n1\nend\n"], [3, 4, 4, 'sleep'], [3, 5, 6, ''],
                                         [4]))
write(a, 'fork_memory', "\0".b + msgs(hello, [3, 1, 7, ''], [3, 2, 8, '/tmp/shapes.json'], [3, 3, 9, ''],
                                       [4]))
write(a, 'top', "\x03".b + msgs(hello, [5, 1, 1000, 1, [false, ['/app/', '/lib/'], ['^Rack']], 1, 0], [4]))
write(a, 'top_all', "\0".b + msgs(hello, [5, 6, 10, 0, [true, [], []], 16, 0]))
write(a, 'top_by_time', "\0".b + msgs(hello, [5, 3, 100, 2, [false, [], []], 16, 0]))
write(a, 'top_profile', "\0".b + msgs(hello, [5, 8, 100, 4, [false, [], []], 250, 10_000], [4]))
write(a, 'top_paths', "\0".b + msgs(hello, [5, 1, 1000, 8, [false, [], []], 1, 0], [4]))
write(a, 'detach', "\x01".b + msgs(hello, [4]))
# Queue message bodies (struct trc_hello without mtype), also checked by trc_wire_hello: an
# abstract socket name, and a protocol 2 client's socket path.
name = '@tracer-100-200-0123456789abcdef'
write(a, 'queue_hello', [0x54524331, VERSION, 100].pack('LLl') + name.b + "\0".b * (108 - name.size))
path = '/tmp/tracer-100-200/sock'
write(a, 'queue_hello_path', [0x54524331, 2, 100].pack('LLl') + path.b + "\0".b * (108 - path.size))

# ---- agent -> client (fuzz_client_decode): byte 0 printer options, byte 1 read sizes ----
c = 'fuzz_client_decode'
welcome = [64, VERSION, 200, '3.1.2', '/app', 1_000_000_000, 1_700_000_000_000_000_000, false, 1]
write(c, 'welcome', "\x02\x00".b + msgs(welcome))
write(c, 'error', "\x02\x00".b + msgs([65, 2, 'process 200 is already traced by pid 99']))
write(c, 'eval', "\x02\x05".b + msgs(welcome, [68, 1, true, '42'], [68, 1, false, 'NameError: x'],
                                     [69, 0, 0, 0]))
write(c, 'interactive', "\x02\x03".b + msgs(welcome, [68, 1, true, 'incomplete'], [68, 2, true, 'complete'],
                                             [68, 4, true, '1'], [68, 3, false, 'Interrupt: interrupted by tracer'],
                                             [69, 0, 0, 0]))
write(c, 'top', "\x02\x00".b + msgs(welcome, [67, 3, 1000],
                                    [70, 1_000_000_000, 1234, 5, 3, 1, 4_500_000,
                                     [['/app/a.rb', 10, 'Foo#bar', 100, 2_000_000, 1_000_000,
                                       [90, 6, 4] + [0] * 17, '', 0],
                                      ['', 0, 'String', 7, 0, 0, [], '', 0],
                                      ['/gems/x.rb', 3, 'KeyError', 2, 0, 0, [], '/app/a.rb', 12]],
                                     [[1, 0, '/app/a.rb', 10, 'Foo#bar', 100, 1_000_000],
                                      [2, 1, '', 0, 'Kernel#sleep', 3, 500_000]]]))
# --top profile: frames, threads, a tree of two roots (one with a tag) and their weights.
write(c, 'profile', "\x02\x00".b + msgs(welcome, [67, 0, 0],
                                        [72, [[1, 2, '(garbage collection)', '', 0], [9, 0, 'Foo#bar', '/app/a.rb', 3],
                                              [10, 1, 'Array#sort', '', 0]],
                                         [[0, 'main'], [1, 'puma srv tp 001']], [[1, 'UsersController#index']],
                                         1_000_000_000, 12, 1, 100, 40_000,
                                         [[1, 0, 0], [4, 1, 1]], [[2, 1, 9], [3, 2, 10], [5, 4, 1]],
                                         [[2, 3, 30_000_000, 30_000_000], [3, 8, 80_000_000, 90_000_000],
                                          [5, 1, 10_000_000, 10_000_000]]]))
methods = [[128, 0, 'Worker', '#', 'work', '/app/w.rb', 3],
           [128, 1, 'Worker', '#', 'helper', '/app/w.rb', 4],
           [128, 2, 'Worker', '.', 'build', '/app/w.rb', 5],
           [128, 3, '', '', 'sleep', '', 0]]
threads = [[129, 0, 'main'], [129, 1, 'worker-1']]
tree = [[130, 0, 2, 1_000_000_010], [131, 0, 2, 1_000_000_020],
        [130, 0, 0, 1_000_001_000], [133, 0, 0, 0, '#<Worker>'], [133, 0, 0, 1, '1'],
        [130, 0, 1, 1_000_001_100], [131, 0, 1, 1_000_001_200],
        [130, 1, 3, 1_000_001_150],
        [132, 0, 1_000_001_300, 'ArgumentError', 'worker failed', '/app/w.rb', 7],
        [131, 1, 3, 1_000_002_000], [131, 0, 0, 1_000_003_000]]
write(c, 'trace', "\x02\x00".b + msgs(welcome, [66, 0, 3, false, '', ''], [67, 3, 1000], *methods, *threads, *tree,
                                      [69, 11, 0, 0]))
write(c, 'trace_chunked', "\x3a\x07".b + msgs(welcome, [67, 3, 1000], *methods, *threads, *tree,
                                              [135, 12], [69, 11, 12, 0]))
write(c, 'slow', "\x12\x00".b + msgs(welcome, [67, 3, 1000], *methods,
                                     [134, 0, 1, 1_000_000_000, 150_000_000, 1],
                                     [134, 0, 0, 1_000_000_000, 300_000_000, 0]))
write(c, 'unknown_ids', "\x0a\x00".b + msgs([130, 7, 99, 5], [133, 7, 9, 9, 'x'], [131, 7, 99, 6],
                                            [131, 8, 1, 0]))
# Marks: a thread begins (no thread of the trace yet), calls, ends under its name; one more
# ends whose beginning came before the trace.
write(c, 'threads', "\x0a\x03".b + msgs(welcome, [67, 3, 1000], *methods, *threads,
                                        [137, 0xffffffff, 1_000_000_000, '#<Thread:0x7f00 /app/w.rb:3 run>'],
                                        [130, 1, 0, 1_000_000_100], [131, 1, 0, 1_000_000_200],
                                        [138, 1, 1_000_000_300, '#<Thread:0x7f00@worker-1 /app/w.rb:3 run>'],
                                        [138, 0, 1_000_000_400, ''], [69, 4, 0, 0]))
# Names a hostile app gives: escapes, a C1 control, bidi controls, a byte that is no UTF-8, a
# NUL, and names, a thread's and a file's past TRC_NAME_MAX, which the decoder cuts.
long = ("\u202e\e[2J" + 'x' * 700).b + "\xff\u2066".b
hostile = [[128, 0, "Evil\e]0;t\a", '#', "a\0b\u009b", "/app/\u202ex.rb", 1],
           [128, 1, long, '.', long * 2, long, 2]]
write(c, 'hostile', "\x02\x00".b + msgs(welcome, [67, 3, 1000], *hostile, [129, 0, long],
                                        [130, 0, 0, 1_000_000_010], [130, 0, 1, 1_000_000_020],
                                        [131, 0, 1, 1_000_000_030], [131, 0, 0, 1_000_000_040],
                                        [70, 1_000_000_000, 2, 0, 0, 0, 0,
                                         [[long, 1, long, 1, 0, 0, [], long, 3], ['/app/a.rb', 2, "a\0b", 1, 0, 0, [], '', 0]],
                                         []],
                                        [69, 4, 0, 0]))

# ---- escape.c (fuzz_client_escape): the bytes of a name ----
e = 'fuzz_client_escape'
write(e, 'bidi', "evil\u202egpj.exe \u2066a\u2069 \u200f\u061c \u2028".b)
write(e, 'long_name', ('a' * 300 + "\u202e\e[31m\xff\\x\"<'&>\0".b + 'b' * 300).b)
