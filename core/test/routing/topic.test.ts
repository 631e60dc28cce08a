import {
  checkSubscription,
  hasWildcard,
  isWellFormedUtf8,
  parseSubscription,
  PROTOCOL_TOPIC_LIMITS,
  utf8ByteLength,
  validateTopicFilter,
  validateTopicName,
  type TopicLimits,
} from '../../src/routing/topic';

const limits: TopicLimits = { maxLength: 65535, maxLevels: 128, maxLevelLength: 1024 };
const reason = (check: { ok: boolean; reason?: string }): string => (check.ok ? 'ok' : check.reason!);

describe('validateTopicName', () => {
  it.each([
    ['a', 'ok'],
    ['a/b/c', 'ok'],
    ['/', 'ok'],
    ['a//b', 'ok'],
    ['/a/', 'ok'],
    ['$SYS/broker', 'ok'],
    [' ', 'ok'],
    ['über/größe/日本/😀', 'ok'],
    ['', 'empty'], // [MQTT-4.7.3-1]
    ['a/+', 'wildcard'], // [MQTT-3.3.2-2]
    ['a/#', 'wildcard'],
    ['a+b', 'wildcard'],
    ['#', 'wildcard'],
    ['a\u0000b', 'null-char'], // [MQTT-4.7.3-2]
    ['a/\ud800', 'invalid-utf8'],
    ['\udc00/a', 'invalid-utf8'],
    ['a\ud83d', 'invalid-utf8'],
  ])('%j → %s', (topic, expected) => {
    expect(reason(validateTopicName(topic, limits))).toBe(expected);
  });

  it('returns the same constant object on success, so the ok path allocates nothing', () => {
    expect(validateTopicName('a/b', limits)).toBe(validateTopicName('c', limits));
  });

  it('counts the length in UTF-8 bytes, at the boundary', () => {
    const l: TopicLimits = { maxLength: 10, maxLevels: 128, maxLevelLength: 1024 };
    expect(reason(validateTopicName('a'.repeat(10), l))).toBe('ok');
    expect(reason(validateTopicName('a'.repeat(11), l))).toBe('too-long');
    // 'é' is 2 bytes: 5 of them is 10 bytes, 6 is 12.
    expect(reason(validateTopicName('é'.repeat(5), l))).toBe('ok');
    expect(reason(validateTopicName('é'.repeat(5) + 'a', l))).toBe('too-long');
    // '日' is 3 bytes.
    expect(reason(validateTopicName('日日日a', l))).toBe('ok');
    expect(reason(validateTopicName('日日日aa', l))).toBe('too-long');
    // '😀' is a surrogate pair: 2 code units, 4 bytes.
    expect(reason(validateTopicName('😀😀aa', l))).toBe('ok');
    expect(reason(validateTopicName('😀😀aaa', l))).toBe('too-long');
    // Slashes count.
    expect(reason(validateTopicName('a/b/c/d/e/', l))).toBe('ok');
    expect(reason(validateTopicName('a/b/c/d/e/f', l))).toBe('too-long');
  });

  it('never allows more than 65535 bytes whatever the configured limit', () => {
    const wide: TopicLimits = { maxLength: 1_000_000, maxLevels: 1_000_000, maxLevelLength: 1_000_000 };
    expect(reason(validateTopicName('a'.repeat(65535), wide))).toBe('ok');
    expect(reason(validateTopicName('a'.repeat(65536), wide))).toBe('too-long');
    expect(reason(validateTopicName('é'.repeat(32768), wide))).toBe('too-long');
    expect(reason(validateTopicName('é'.repeat(32767), wide))).toBe('ok');
  });

  it('limits the number of levels, at the boundary', () => {
    const l: TopicLimits = { maxLength: 65535, maxLevels: 3, maxLevelLength: 1024 };
    expect(reason(validateTopicName('a/b/c', l))).toBe('ok');
    expect(reason(validateTopicName('a/b/c/d', l))).toBe('too-many-levels');
    expect(reason(validateTopicName('//', l))).toBe('ok');
    expect(reason(validateTopicName('///', l))).toBe('too-many-levels');
    expect(reason(validateTopicName('a', { ...l, maxLevels: 1 }))).toBe('ok');
    expect(reason(validateTopicName('a/', { ...l, maxLevels: 1 }))).toBe('too-many-levels');
  });

  it('limits each level in UTF-8 bytes, first, middle and last', () => {
    const l: TopicLimits = { maxLength: 65535, maxLevels: 128, maxLevelLength: 4 };
    expect(reason(validateTopicName('abcd/abcd/abcd', l))).toBe('ok');
    expect(reason(validateTopicName('abcde/a', l))).toBe('level-too-long');
    expect(reason(validateTopicName('a/abcde/a', l))).toBe('level-too-long');
    expect(reason(validateTopicName('a/abcde', l))).toBe('level-too-long');
    expect(reason(validateTopicName('éé/a', l))).toBe('ok');
    expect(reason(validateTopicName('ééa/a', l))).toBe('level-too-long');
    expect(reason(validateTopicName('😀', l))).toBe('ok');
    expect(reason(validateTopicName('a/😀a', l))).toBe('level-too-long');
  });
});

describe('validateTopicFilter', () => {
  it.each([
    ['#', 'ok'],
    ['+', 'ok'],
    ['a/#', 'ok'],
    ['+/+', 'ok'],
    ['/+', 'ok'],
    ['+/', 'ok'],
    ['a/+/b/#', 'ok'],
    ['+/#', 'ok'],
    ['$SYS/#', 'ok'],
    ['a//b', 'ok'],
    ['/', 'ok'],
    ['', 'empty'], // [MQTT-4.7.3-1]
    ['a/#/b', 'bad-wildcard'], // [MQTT-4.7.1-2]
    ['#/', 'bad-wildcard'],
    ['a#', 'bad-wildcard'],
    ['a/b#', 'bad-wildcard'],
    ['##', 'bad-wildcard'],
    ['a+', 'bad-wildcard'], // [MQTT-4.7.1-3]
    ['+a', 'bad-wildcard'],
    ['a/+b/c', 'bad-wildcard'],
    ['++', 'bad-wildcard'],
    ['+#', 'bad-wildcard'],
    ['a/\u0000', 'null-char'],
    ['a/\ud800', 'invalid-utf8'],
  ])('%j → %s', (filter, expected) => {
    expect(reason(validateTopicFilter(filter, limits))).toBe(expected);
  });

  it('applies the length and level limits to filters too', () => {
    const l: TopicLimits = { maxLength: 6, maxLevels: 3, maxLevelLength: 2 };
    expect(reason(validateTopicFilter('ab/+/#', l))).toBe('ok');
    expect(reason(validateTopicFilter('ab/+/#/', { ...l, maxLevels: 5, maxLength: 100 }))).toBe('bad-wildcard');
    expect(reason(validateTopicFilter('a/+/b/#', { ...l, maxLength: 100 }))).toBe('too-many-levels');
    expect(reason(validateTopicFilter('abc/#', l))).toBe('level-too-long');
    expect(reason(validateTopicFilter('é/é/+', l))).toBe('too-long');
  });
});

describe('hasWildcard', () => {
  it.each([
    ['a/b', false],
    ['a/+', true],
    ['#', true],
    ['$share/g/a', false],
  ])('%j → %s', (filter, expected) => {
    expect(hasWildcard(filter)).toBe(expected);
  });
});

describe('isWellFormedUtf8', () => {
  it.each([
    ['empty', [], true],
    ['ascii', [0x61, 0x2f, 0x62], true],
    ['U+0000 is well-formed', [0x00], true],
    ['2-byte é', [0xc3, 0xa9], true],
    ['3-byte 日', [0xe6, 0x97, 0xa5], true],
    ['4-byte 😀', [0xf0, 0x9f, 0x98, 0x80], true],
    ['U+10FFFF', [0xf4, 0x8f, 0xbf, 0xbf], true],
    ['lone continuation', [0x80], false],
    ['truncated 2-byte', [0xc3], false],
    ['truncated 3-byte', [0xe6, 0x97], false],
    ['overlong /', [0xc0, 0xaf], false],
    ['overlong 3-byte', [0xe0, 0x80, 0xaf], false],
    ['encoded surrogate U+D800', [0xed, 0xa0, 0x80], false],
    ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80], false],
    ['0xFF', [0xff], false],
  ])('%s', (_name, bytes, expected) => {
    expect(isWellFormedUtf8(Uint8Array.from(bytes))).toBe(expected);
  });

  it('agrees with the UTF-8 byte length of strings', () => {
    expect(utf8ByteLength('a/é/日/😀')).toBe(1 + 1 + 2 + 1 + 3 + 1 + 4);
    expect(isWellFormedUtf8(Buffer.from('a/é/日/😀'))).toBe(true);
  });
});

describe('parseSubscription', () => {
  it.each([
    ['a/b', { shareKind: 'none', topicFilter: 'a/b' }],
    ['$share', { shareKind: 'none', topicFilter: '$share' }],
    ['$sharex/g/a', { shareKind: 'none', topicFilter: '$sharex/g/a' }],
    ['$SYS/#', { shareKind: 'none', topicFilter: '$SYS/#' }],
    ['$share/g/a/b', { shareKind: 'share', group: 'g', topicFilter: 'a/b' }], // [MQTT-4.8.2-1]
    ['$share/group-1/#', { shareKind: 'share', group: 'group-1', topicFilter: '#' }],
    ['$share/g//', { shareKind: 'share', group: 'g', topicFilter: '/' }],
    ['$share/g/$SYS/x', { shareKind: 'share', group: 'g', topicFilter: '$SYS/x' }],
    ['$oshare/workers/jobs/+', { shareKind: 'oshare', group: 'workers', topicFilter: 'jobs/+' }],
    ['$share/g', { shareKind: 'malformed', reason: 'missing-filter' }],
    ['$share/g/', { shareKind: 'malformed', reason: 'empty-filter' }],
    ['$share//x', { shareKind: 'malformed', reason: 'empty-group' }],
    ['$share/', { shareKind: 'malformed', reason: 'empty-group' }],
    ['$share/g+/x', { shareKind: 'malformed', reason: 'invalid-group' }], // [MQTT-4.8.2-2]
    ['$share/#/x', { shareKind: 'malformed', reason: 'invalid-group' }],
    ['$share/+/x', { shareKind: 'malformed', reason: 'invalid-group' }],
    ['$oshare/g', { shareKind: 'malformed', reason: 'missing-filter' }],
    ['$oshare//x', { shareKind: 'malformed', reason: 'empty-group' }],
  ])('%j', (filter, expected) => {
    expect(parseSubscription(filter)).toEqual(expected);
  });
});

describe('checkSubscription', () => {
  it('accepts good filters with their parsed form', () => {
    expect(checkSubscription('$share/g/a/+', limits)).toEqual({ ok: true, parsed: { shareKind: 'share', group: 'g', topicFilter: 'a/+' } });
    expect(checkSubscription('a/#', limits)).toEqual({ ok: true, parsed: { shareKind: 'none', topicFilter: 'a/#' } });
  });

  it.each([
    ['$share/g', 'missing-filter'],
    ['$share/g/a/#/b', 'bad-wildcard'],
    ['$share/g\u0000/a', 'null-char'],
    ['$share/g+/a', 'invalid-group'],
    ['$oshare/g/', 'empty-filter'],
    ['a/#/b', 'bad-wildcard'],
    ['', 'empty'],
  ])('%j → %s', (filter, expected) => {
    expect(reason(checkSubscription(filter, limits))).toBe(expected);
  });

  it('limits the group name to one level length and the whole string to 65535 bytes', () => {
    expect(reason(checkSubscription(`$share/${'g'.repeat(5)}/a`, { ...limits, maxLevelLength: 4 }))).toBe('level-too-long');
    expect(reason(checkSubscription(`$share/g/${'a'.repeat(65530)}`, PROTOCOL_TOPIC_LIMITS))).toBe('too-long');
    expect(reason(checkSubscription(`$share/g/${'a'.repeat(65526)}`, PROTOCOL_TOPIC_LIMITS))).toBe('ok');
  });
});
